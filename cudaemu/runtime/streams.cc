// Streams and events. A stream is an in-order queue run by a worker thread of its own, so
// work on different streams really runs concurrently and a missing synchronisation shows up
// as a wrong result or a TSan report; CUDAEMU_STREAM_DELAY_US=M delays every item by a
// random 0..M µs (seeded by CUDAEMU_SEED, a number or `random`) to shake such bugs out.
// Every wait — stream or event synchronisation, cudaStreamWaitEvent — goes through a mutex
// and condition variable of the stream waited for: a real happens-before edge.
//
// The legacy default stream (handle 0) of each device orders with the device's blocking
// streams (created without cudaStreamNonBlocking), as CUDA's does.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <random>
#include <string_view>
#include <thread>

#include "cudaemu/runtime/core.h"

namespace cudaemu::internal {
namespace {

class StreamImpl : public Stream, public std::enable_shared_from_this<StreamImpl> {
 public:
  StreamImpl(int device, bool legacy, bool blocking, uint64_t seed)
      : device_(device), legacy_(legacy), blocking_(blocking), random_(seed) {}

  int device() const override { return device_; }
  bool legacy() const { return legacy_; }
  bool blocking() const { return blocking_; }

  void Start() {
    std::thread([self = shared_from_this()] { self->Run(); }).detach();
  }

  void Enqueue(std::string what, std::function<cudaError_t()> work) override;

  uint64_t Tail() override {
    std::lock_guard<std::mutex> lock(mu_);
    return enqueued_;
  }
  void WaitFor(uint64_t position) override {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return completed_ >= position; });
  }
  bool Reached(uint64_t position) override {
    std::lock_guard<std::mutex> lock(mu_);
    return completed_ >= position;
  }

  // No more work will come: the worker ends once the queue is drained.
  void Retire() {
    std::lock_guard<std::mutex> lock(mu_);
    retired_ = true;
    work_cv_.notify_all();
  }

  // Adds an item without the legacy-stream ordering (used for that ordering itself).
  void EnqueueRaw(std::string what, std::function<cudaError_t()> work) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Item{++enqueued_, std::move(what), std::move(work)});
    work_cv_.notify_all();
  }

 private:
  struct Item {
    uint64_t position;
    std::string what;
    std::function<cudaError_t()> work;
  };

  void Run() {
    const int64_t delay_us = EnvInt("CUDAEMU_STREAM_DELAY_US", 0);
    while (true) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return !queue_.empty() || retired_; });
        if (queue_.empty()) return;  // retired and drained
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      if (delay_us > 0) {
        std::uniform_int_distribution<int64_t> pick(0, delay_us);
        std::this_thread::sleep_for(std::chrono::microseconds(pick(random_)));
      }
      // After a fault the context is unusable: later work is skipped, as on a GPU.
      if (Sticky(device_) == cudaSuccess) {
        const cudaError_t error = item.work();
        if (error != cudaSuccess) SetSticky(device_, error);
      }
      item.work = nullptr;  // release what the work captured before reporting completion
      std::lock_guard<std::mutex> lock(mu_);
      completed_ = item.position;
      done_cv_.notify_all();
    }
  }

  const int device_;
  const bool legacy_;
  const bool blocking_;
  std::mt19937_64 random_;  // used by the worker thread only
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<Item> queue_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  bool retired_ = false;
};

struct EventImpl {
  int device = 0;
  std::shared_ptr<StreamImpl> stream;  // null until recorded
  uint64_t position = 0;
  bool timing = true;  // not cudaEventDisableTiming
  // Timing: each record enqueues a stamp that, run in stream order, writes the time the
  // stream reached it (steady clock, ns) if no later record has superseded it.
  std::atomic<uint64_t> generation{0};
  std::atomic<int64_t> stamp_ns{0};  // 0: not reached yet
};

struct Registry {
  std::mutex mu;
  std::map<const void*, std::shared_ptr<StreamImpl>> streams;      // by handle
  std::map<int, std::shared_ptr<StreamImpl>> legacy;               // per device
  std::map<int, std::vector<std::weak_ptr<StreamImpl>>> by_device;  // every stream
  std::map<const void*, std::shared_ptr<EventImpl>> events;
  uint64_t created = 0;
};

Registry& GetRegistry() {
  static Registry* const registry = new Registry();  // never destroyed (detached workers)
  return *registry;
}

// The process's seed: CUDAEMU_SEED, or with CUDAEMU_SEED=random one drawn per process (so
// that repeated runs of a test shake other delays) and printed, to replay a failing run.
uint64_t ProcessSeed() {
  static const uint64_t seed = [] {
    const char* text = std::getenv("CUDAEMU_SEED");
    if (text == nullptr || std::string_view(text) != "random") {
      char* end = nullptr;
      if (text != nullptr && text[0] != '\0' && (std::strtoll(text, &end, 10), *end != '\0')) {
        std::fprintf(stderr,
                     "cudaemu: CUDAEMU_SEED='%s' is neither an integer nor `random`; using 1\n",
                     text);
        return uint64_t{1};
      }
      return static_cast<uint64_t>(EnvInt("CUDAEMU_SEED", 1));
    }
    const uint64_t drawn = std::random_device()() & 0x7fffffffu;
    std::fprintf(stderr,
                 "cudaemu: CUDAEMU_SEED=random drew %llu (CUDAEMU_SEED=%llu replays "
                 "this process's stream delays)\n",
                 static_cast<unsigned long long>(drawn), static_cast<unsigned long long>(drawn));
    return drawn;
  }();
  return seed;
}

uint64_t NextSeed(Registry& registry) { return ProcessSeed() * 1000003u + ++registry.created; }

std::shared_ptr<StreamImpl> NewStream(Registry& registry, int device, bool legacy,
                                      bool blocking) {
  auto stream = std::make_shared<StreamImpl>(device, legacy, blocking, NextSeed(registry));
  stream->Start();
  registry.by_device[device].push_back(stream);
  return stream;
}

std::shared_ptr<StreamImpl> LegacyStream(int device) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto& legacy = registry.legacy[device];
  if (legacy == nullptr) legacy = NewStream(registry, device, /*legacy=*/true, /*blocking=*/true);
  return legacy;
}

// The streams of `device` (live ones), for device-wide synchronisation.
std::vector<std::shared_ptr<StreamImpl>> StreamsOf(int device) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  std::vector<std::shared_ptr<StreamImpl>> streams;
  auto& list = registry.by_device[device];
  for (size_t i = 0; i < list.size();) {
    if (auto stream = list[i].lock()) {
      streams.push_back(std::move(stream));
      ++i;
    } else {
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return streams;
}

void StreamImpl::Enqueue(std::string what, std::function<cudaError_t()> work) {
  // Legacy default stream semantics: its work waits for the device's blocking streams, and
  // theirs waits for it.
  if (blocking_) {
    for (const auto& other : StreamsOf(device_)) {
      if (other.get() == this || !other->blocking() || (!legacy_ && !other->legacy())) continue;
      const uint64_t position = other->Tail();
      if (position == 0) continue;
      EnqueueRaw("wait for the legacy default stream order",
                 [other, position] {
                   other->WaitFor(position);
                   return cudaSuccess;
                 });
    }
  }
  EnqueueRaw(std::move(what), std::move(work));
}

}  // namespace

uint64_t EmulationSeed() { return ProcessSeed(); }

cudaError_t ResolveStream(cudaStream_t handle, std::shared_ptr<Stream>* stream) {
  if (handle == nullptr) {
    int device = 0;
    const cudaError_t error = CurrentContext(&device);
    if (error != cudaSuccess) return error;
    *stream = LegacyStream(device);
    return cudaSuccess;
  }
  Registry& registry = GetRegistry();
  std::shared_ptr<StreamImpl> found;
  {
    std::lock_guard<std::mutex> lock(registry.mu);
    auto it = registry.streams.find(handle);
    if (it == registry.streams.end()) return cudaErrorInvalidResourceHandle;
    found = it->second;
  }
  const cudaError_t error = EnsureContext(found->device());
  if (error != cudaSuccess) return error;
  *stream = std::move(found);
  return cudaSuccess;
}

void SynchronizeDevice(int device) {
  for (const auto& stream : StreamsOf(device)) stream->WaitFor(stream->Tail());
}

}  // namespace cudaemu::internal

using namespace cudaemu::internal;  // NOLINT: the C API below is the runtime's surface

namespace {

// Where `event` was last recorded: the stream and the position it waits for (null stream:
// never recorded, hence complete).
struct Recorded {
  std::shared_ptr<StreamImpl> stream;
  uint64_t position = 0;
};
Recorded RecordedAt(const EventImpl& event) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  return Recorded{event.stream, event.position};
}

std::shared_ptr<EventImpl> FindEvent(cudaEvent_t event) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto it = registry.events.find(event);
  return it == registry.events.end() ? nullptr : it->second;
}

}  // namespace

extern "C" {

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (stream == nullptr || (flags & ~0x1u) != 0) return Record(cudaErrorInvalidValue);
  int device = 0;
  const cudaError_t error = CurrentContext(&device);
  if (error != cudaSuccess) return Record(error);
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto impl = NewStream(registry, device, /*legacy=*/false,
                        /*blocking=*/(flags & cudaStreamNonBlocking) == 0);
  *stream = reinterpret_cast<cudaStream_t>(impl.get());
  registry.streams[impl.get()] = std::move(impl);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

// Returns at once; the stream's pending work still runs, then its worker ends.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Registry& registry = GetRegistry();
  std::shared_ptr<StreamImpl> impl;
  {
    std::lock_guard<std::mutex> lock(registry.mu);
    auto it = registry.streams.find(stream);
    if (it == registry.streams.end()) return Record(cudaErrorInvalidResourceHandle);
    impl = std::move(it->second);
    registry.streams.erase(it);
  }
  impl->Retire();
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  std::shared_ptr<Stream> impl;
  const cudaError_t error = ResolveStream(stream, &impl);
  if (error != cudaSuccess) return Record(error);
  CountHostWait();
  impl->WaitFor(impl->Tail());
  return Record(Sticky(impl->device()));
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  std::shared_ptr<Stream> impl;
  const cudaError_t error = ResolveStream(stream, &impl);
  if (error != cudaSuccess) return Record(error);
  if (!impl->Reached(impl->Tail())) return Record(cudaErrorNotReady);
  return Record(Sticky(impl->device()));
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (flags != 0) return Record(cudaErrorInvalidValue);
  std::shared_ptr<Stream> impl;
  const cudaError_t error = ResolveStream(stream, &impl);
  if (error != cudaSuccess) return Record(error);
  const std::shared_ptr<EventImpl> found = FindEvent(event);
  if (found == nullptr) return Record(cudaErrorInvalidResourceHandle);
  // The event's state at the time of the call is what the stream waits for.
  const Recorded recorded = RecordedAt(*found);
  std::shared_ptr<StreamImpl> signaller = recorded.stream;
  const uint64_t position = recorded.position;
  if (signaller == nullptr || position == 0) return cudaSuccess;  // never recorded
  impl->Enqueue("cudaStreamWaitEvent", [signaller, position] {
    signaller->WaitFor(position);
    return cudaSuccess;
  });
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (event == nullptr || (flags & ~0x7u) != 0) return Record(cudaErrorInvalidValue);
  int device = 0;
  const cudaError_t error = CurrentContext(&device);
  if (error != cudaSuccess) return Record(error);
  auto impl = std::make_shared<EventImpl>();
  impl->device = device;
  impl->timing = (flags & cudaEventDisableTiming) == 0;
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  *event = reinterpret_cast<cudaEvent_t>(impl.get());
  registry.events[impl.get()] = std::move(impl);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  if (registry.events.erase(event) == 0) return Record(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  std::shared_ptr<Stream> impl;
  const cudaError_t error = ResolveStream(stream, &impl);
  if (error != cudaSuccess) return Record(error);
  const std::shared_ptr<EventImpl> found = FindEvent(event);
  if (found == nullptr) return Record(cudaErrorInvalidResourceHandle);
  // An event belongs to the device that was current when it was made; recording it on
  // another device's stream is invalid.
  if (found->device != impl->device()) return Record(cudaErrorInvalidResourceHandle);
  auto stream_impl = std::static_pointer_cast<StreamImpl>(impl);
  if (found->timing) {
    // Outside the registry's lock: the stamp runs on the stream's worker.
    const uint64_t generation = found->generation.fetch_add(1) + 1;
    found->stamp_ns.store(0);
    stream_impl->Enqueue("cudaEventRecord", [found, generation] {
      if (found->generation.load() == generation) {
        found->stamp_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now().time_since_epoch())
                                  .count());
      }
      return cudaSuccess;
    });
  }
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  found->stream = stream_impl;
  found->position = stream_impl->Tail();
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return Record(cudaErrorInvalidValue);
  const std::shared_ptr<EventImpl> first = FindEvent(start);
  const std::shared_ptr<EventImpl> last = FindEvent(end);
  if (first == nullptr || last == nullptr) return Record(cudaErrorInvalidResourceHandle);
  // CUDA's rules: both recorded with timing, and both reached.
  if (!first->timing || !last->timing) return Record(cudaErrorInvalidResourceHandle);
  const Recorded a = RecordedAt(*first);
  const Recorded b = RecordedAt(*last);
  if (a.stream == nullptr || b.stream == nullptr) return Record(cudaErrorInvalidResourceHandle);
  if (!a.stream->Reached(a.position) || !b.stream->Reached(b.position)) {
    return Record(cudaErrorNotReady);
  }
  *ms = static_cast<float>(static_cast<double>(last->stamp_ns.load() - first->stamp_ns.load()) /
                           1e6);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  const std::shared_ptr<EventImpl> found = FindEvent(event);
  if (found == nullptr) return Record(cudaErrorInvalidResourceHandle);
  const Recorded recorded = RecordedAt(*found);
  if (recorded.stream == nullptr) return cudaSuccess;
  if (!recorded.stream->Reached(recorded.position)) return Record(cudaErrorNotReady);
  return Record(Sticky(found->device));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  const std::shared_ptr<EventImpl> found = FindEvent(event);
  if (found == nullptr) return Record(cudaErrorInvalidResourceHandle);
  const Recorded recorded = RecordedAt(*found);
  CountHostWait();
  if (recorded.stream != nullptr) recorded.stream->WaitFor(recorded.position);
  return Record(Sticky(found->device));
}

}  // extern "C"
