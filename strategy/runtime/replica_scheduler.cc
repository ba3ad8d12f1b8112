#include "strategy/runtime/replica_scheduler.h"

#include <immintrin.h>

#include "util/check.h"

namespace tower {

// One OS thread's share of the replicas. In fiber mode each replica has a fiber, reused from
// run to run (started again each run: nothing is mapped or allocated per run).
struct ReplicaScheduler::Thread {
  struct Slot {
    Thread* thread;
    int index;  // into replicas / fibers
  };
  ReplicaScheduler* owner = nullptr;
  int index = 0;  // which thread: 0 the caller's
  std::vector<int> replicas;
  std::vector<std::unique_ptr<Fiber>> fibers;
  std::vector<Slot> slots;
  std::vector<char> done;
  // The thread's own context, made on the thread that runs this share (thread 0's share
  // runs on whichever thread calls Run, so it is remade when that thread changes).
  std::unique_ptr<Fiber> home;
  std::thread::id home_thread;
  int current = 0;  // the fiber running now
  int live = 0;     // fibers whose body has not returned this run

  // The next fiber after `from`, in turn, whose body has not returned (`from` itself when
  // it is the only one).
  int NextLive(int from) const {
    const int n = static_cast<int>(fibers.size());
    for (int step = 1; step <= n; ++step) {
      const int i = (from + step) % n;
      if (!done[i]) return i;
    }
    return from;
  }
};

thread_local ReplicaScheduler::Thread* ReplicaScheduler::running_share_ = nullptr;

namespace {

// Replica fibers run the whole replica function (a forward and backward pass, Eigen's GEMM
// packing buffers up to 128 KiB on the stack, logging): 1 MiB each.
constexpr size_t kReplicaStackBytes = size_t{1} << 20;

}  // namespace

ReplicaScheduler::ReplicaScheduler(int replicas, int threads, bool spin)
    : replicas_(replicas), threads_(threads), spin_(spin) {
  TOWER_CHECK(replicas >= 1 && threads >= 1 && threads <= replicas)
      << "ReplicaScheduler: " << threads << " threads for " << replicas << " replicas";
  for (int t = 0; t < threads_; ++t) {
    auto share = std::make_unique<Thread>();
    share->owner = this;
    share->index = t;
    deal().ForEachOf(t, [&](int r) { share->replicas.push_back(r); });
    if (uses_fibers()) {
      const int n = static_cast<int>(share->replicas.size());
      for (int i = 0; i < n; ++i) {
        share->fibers.push_back(Fiber::Create(/*color=*/share->replicas[i], kReplicaStackBytes));
        share->slots.push_back(Thread::Slot{share.get(), i});
      }
      share->done.assign(n, 0);
    }
    thread_state_.push_back(std::move(share));
  }
  for (int t = 1; t < threads_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ReplicaScheduler::~ReplicaScheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);
  }
  start_cv_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

Fiber* ReplicaScheduler::FiberEntry(void* slot_pointer) {
  const Thread::Slot& slot = *static_cast<const Thread::Slot*>(slot_pointer);
  Thread& share = *slot.thread;
  share.owner->body_(share.owner->context_, share.replicas[slot.index]);
  share.done[slot.index] = 1;
  if (--share.live == 0) return share.home.get();
  share.current = share.NextLive(slot.index);
  return share.fibers[share.current].get();
}

void ReplicaScheduler::RunThread(Thread& share) {
  if (first_of_threads_ > 0) {
    if (share.index < first_of_threads_) body_(context_, share.replicas.front());
    return;
  }
  if (!uses_fibers()) {
    for (int replica : share.replicas) body_(context_, replica);
    return;
  }
  if (share.home == nullptr || share.home_thread != std::this_thread::get_id()) {
    share.home = Fiber::ForThread();
    share.home_thread = std::this_thread::get_id();
  }
  const int n = static_cast<int>(share.fibers.size());
  for (int i = 0; i < n; ++i) {
    share.done[i] = 0;
    share.fibers[i]->Start(&ReplicaScheduler::FiberEntry, &share.slots[i]);
  }
  share.live = n;
  share.current = 0;
  Thread* const outer = running_share_;  // a replica that runs a strategy of its own
  running_share_ = &share;
  share.home->SwitchTo(share.fibers[0].get());
  running_share_ = outer;
}

bool ReplicaScheduler::OnReplicaFiber() { return running_share_ != nullptr; }

bool ReplicaScheduler::YieldToOtherReplicas() {
  Thread* const share = running_share_;
  if (share == nullptr) return false;
  const int me = share->current;
  const int next = share->NextLive(me);
  if (next == me) return true;
  share->current = next;
  share->fibers[me]->SwitchTo(share->fibers[next].get());
  // Resumed: whoever switched here set `current` back to this fiber.
  return true;
}

void ReplicaScheduler::WorkerLoop(int thread) {
  uint64_t seen = 0;
  while (true) {
    // Wait for the next run: spin a little (runs come back to back), then block.
    uint64_t generation = generation_.load(std::memory_order_acquire);
    for (int i = 0; spin_ && i < 20000 && generation == seen; ++i) {
      _mm_pause();
      generation = generation_.load(std::memory_order_acquire);
    }
    if (generation == seen) {
      // Announced before the last look at the generation (both sequentially consistent):
      // either Run sees a sleeper and notifies under the lock, or this look sees the run.
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      {
        std::unique_lock<std::mutex> lock(mu_);
        start_cv_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
      }
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      generation = generation_.load(std::memory_order_acquire);
    }
    if (stopping_.load(std::memory_order_relaxed)) return;  // published with the generation
    seen = generation;
    // body_, context_ and first_of_threads_ were written before the generation was
    // published (release), and are read after it was seen (acquire).
    RunThread(*thread_state_[thread]);
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        caller_sleeps_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

void ReplicaScheduler::Run(Body body, void* context) { Start(body, context, 0); }

void ReplicaScheduler::RunFirstOfThreads(int threads, Body body, void* context) {
  TOWER_CHECK(threads >= 1 && threads <= threads_)
      << "RunFirstOfThreads: " << threads << " of " << threads_ << " threads";
  Start(body, context, threads);
}

void ReplicaScheduler::Start(Body body, void* context, int first_of_threads) {
  body_ = body;
  context_ = context;
  first_of_threads_ = first_of_threads;
  // A run of the caller's thread alone wakes nobody.
  const int woken = first_of_threads == 1 ? 0 : threads_ - 1;
  pending_.store(woken, std::memory_order_relaxed);
  if (woken > 0) {
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      // Through the lock, so that a worker between its last look and its wait cannot miss it.
      { std::lock_guard<std::mutex> lock(mu_); }
      start_cv_.notify_all();
    }
  }
  RunThread(*thread_state_[0]);
  // Wait for the other threads: spin briefly, then block.
  for (int i = 0; spin_ && i < 20000 && pending_.load(std::memory_order_acquire) != 0; ++i) {
    _mm_pause();
  }
  if (pending_.load(std::memory_order_acquire) != 0) {
    caller_sleeps_.store(true, std::memory_order_seq_cst);
    {
      std::unique_lock<std::mutex> lock(mu_);
      done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_seq_cst) == 0; });
    }
    caller_sleeps_.store(false, std::memory_order_relaxed);
  }
}

}  // namespace tower
