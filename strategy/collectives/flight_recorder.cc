#include "strategy/collectives/flight_recorder.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <thread>

#include <nlohmann/json.hpp>

#include "util/cache_line.h"
#include "util/fiber.h"
#include "util/file.h"

namespace tower {

namespace internal {

// The caller of a training step writes it every step and every replica reads it: on a cache
// line of its own, so that the process's other globals beside it in .bss (the device scope
// stack's guard, this recorder's pointer, the bucket slot) are not moved off every other
// core by each write. Packed with them, the write cost a replica thread a miss on each of
// those globals every step (perf, 2-replica `linreg`, 2026-11-26). External linkage on
// purpose: the optimizer may split an internal global of struct type into its fields
// (clang's GlobalOpt did), and with them goes the padding.
CacheLinePadded<std::atomic<int64_t>> current_step;

}  // namespace internal

namespace {

// The bucket is stored plus one, so that a fiber's first (zeroed) value means none.
FiberLocal<int>& BucketSlot() {
  static FiberLocal<int>* bucket = new FiberLocal<int>();
  return *bucket;
}

int64_t UnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The Unix time at the kernel's tick (a few ms old, read in a few ns): the replicas' sums
// run every step, and a post-mortem asks how long something has been stuck, in seconds.
int64_t CoarseUnixNs() {
  timespec now;
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// Times of a record: precise for the workers' collectives, coarse for the replicas' sums.
int64_t RecordTime(const CollectiveRecord& record) {
  return record.replica >= 0 ? CoarseUnixNs() : UnixNs();
}

// FNV-1a's step on 64-bit words (the bytes' tail zero-padded), chained: the same on every
// worker for the same bytes.
uint64_t Mix(uint64_t hash, const void* data, size_t size) {
  const unsigned char* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bytes + i, std::min<size_t>(8, size - i));
    hash = (hash ^ word) * 1099511628211ull;
    hash ^= hash >> 29;
  }
  return hash;
}

const char* StateName(CollectiveState state) {
  switch (state) {
    case CollectiveState::kInFlight: return "in flight";
    case CollectiveState::kDone: return "done";
    case CollectiveState::kFailed: return "failed";
  }
  return "?";
}

std::string Hex(uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

// The signal handlers write the signal number here; a watcher thread dumps (a handler may
// not allocate, lock or write files).
int signal_pipe[2] = {-1, -1};

void OnSignal(int signal_number) {
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  const int saved_errno = errno;
  ssize_t ignored = write(signal_pipe[1], &byte, 1);
  (void)ignored;
  errno = saved_errno;
}

}  // namespace

void SetCurrentStep(int64_t step) {
  internal::current_step.value.store(step, std::memory_order_relaxed);
}
int64_t CurrentStep() { return internal::current_step.value.load(std::memory_order_relaxed); }

int CurrentBucket() { return BucketSlot().Get() - 1; }
BucketScope::BucketScope(int bucket) : slot_(&BucketSlot().Get()), previous_(*slot_) {
  *slot_ = bucket + 1;
}

uint64_t CollectiveFingerprint(const char* kind, int64_t step, const char* dtype,
                               int64_t elements, uint64_t layout) {
  uint64_t hash = 14695981039346656037ull;
  hash = Mix(hash, kind, std::strlen(kind) + 1);
  hash = Mix(hash, &step, sizeof(step));
  hash = Mix(hash, dtype, std::strlen(dtype) + 1);
  hash = Mix(hash, &elements, sizeof(elements));
  return Mix(hash, &layout, sizeof(layout));
}

FlightRecorder& FlightRecorder::Get() {
  static FlightRecorder* recorder = new FlightRecorder();
  return *recorder;
}

void FlightRecorder::Slot::Lock() {
  while (busy.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
}

FlightRecorder::FlightRecorder() : replica_rings_(new std::atomic<Ring*>[kMaxReplicaRings]) {
  for (int r = 0; r < kMaxReplicaRings; ++r) replica_rings_[r].store(nullptr);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  host_ = host;
  if (const char* directory = std::getenv("TOWER_FLIGHT_RECORDER_DIR")) {
    if (*directory != '\0') directory_ = directory;
  }
  if (!directory_.empty()) InstallSignalHandlers();
}

FlightRecorder::Ring& FlightRecorder::RingFor(int replica) {
  if (replica < 0 || replica >= kMaxReplicaRings) return process_ring_;
  Ring* ring = replica_rings_[replica].load(std::memory_order_acquire);
  if (ring != nullptr) return *ring;
  std::lock_guard<std::mutex> lock(rings_mu_);
  ring = replica_rings_[replica].load(std::memory_order_acquire);
  if (ring == nullptr) {
    ring = new Ring(kReplicaCapacity);  // lives as long as the process, as the recorder
    replica_rings_[replica].store(ring, std::memory_order_release);
  }
  return *ring;
}

uint64_t FlightRecorder::Begin(const CollectiveRecord& record, const std::string& what) {
  const int64_t now = RecordTime(record);
  const bool own_ring = record.replica >= 0 && record.replica < kMaxReplicaRings;
  Ring& ring = RingFor(record.replica);
  const uint64_t count = ring.next.fetch_add(1, std::memory_order_relaxed);
  const uint64_t ticket =
      (static_cast<uint64_t>(own_ring ? record.replica + 1 : 0) << kRingShift) | count;
  Slot& slot = ring.slots[count % ring.capacity];
  slot.Lock();
  slot.ticket = ticket;
  slot.record = record;
  if (!what.empty()) {
    const size_t length = std::min(what.size(), sizeof(record.what) - 1);
    std::memcpy(slot.record.what, what.data(), length);
    slot.record.what[length] = '\0';
  }
  slot.record.start_unix_ns = now;
  slot.record.end_unix_ns = 0;
  slot.record.state = CollectiveState::kInFlight;
  slot.Unlock();
  return ticket;
}

void FlightRecorder::End(uint64_t ticket, CollectiveState state) {
  const uint64_t ring_index = ticket >> kRingShift;
  Ring* ring = ring_index == 0 ? &process_ring_
                               : replica_rings_[ring_index - 1].load(std::memory_order_acquire);
  if (ring == nullptr) return;
  Slot& slot = ring->slots[(ticket & ((uint64_t{1} << kRingShift) - 1)) % ring->capacity];
  slot.Lock();
  // A record already overwritten by a newer one (the ring went round) is gone.
  if (slot.ticket == ticket) {
    slot.record.end_unix_ns = RecordTime(slot.record);
    slot.record.state = state;
  }
  slot.Unlock();
}

void FlightRecorder::SetProcess(int rank, int size, const std::string& host) {
  std::lock_guard<std::mutex> lock(mu_);
  rank_ = rank;
  size_ = size;
  host_ = host;
}

void FlightRecorder::SetDumpDirectory(const std::string& directory) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!directory.empty()) directory_ = directory;
    if (directory_.empty()) return;
  }
  InstallSignalHandlers();
}

std::string FlightRecorder::dump_directory() const {
  std::lock_guard<std::mutex> lock(mu_);
  return directory_;
}

std::string FlightRecorder::DumpPath() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (directory_.empty()) return "";
  return directory_ + "/flight_recorder.rank" + std::to_string(rank_) + ".json";
}

std::vector<CollectiveRecord> FlightRecorder::Records() const {
  std::vector<CollectiveRecord> records;
  auto collect = [&](const Ring& ring) {
    const uint64_t next = ring.next.load(std::memory_order_relaxed);
    const uint64_t first = next > ring.capacity ? next - ring.capacity : 0;
    for (uint64_t count = first; count < next; ++count) {
      Slot& slot = ring.slots[count % ring.capacity];
      slot.Lock();
      // A record begun but not written yet, or already overwritten, is left out (a slot's
      // ticket carries its ring in the top bits).
      if ((slot.ticket & ((uint64_t{1} << kRingShift) - 1)) == count) {
        records.push_back(slot.record);
      }
      slot.Unlock();
    }
  };
  collect(process_ring_);
  for (int r = 0; r < kMaxReplicaRings; ++r) {
    if (const Ring* ring = replica_rings_[r].load(std::memory_order_acquire)) collect(*ring);
  }
  for (CollectiveRecord& record : records) {
    if (record.fingerprint == 0) {
      record.fingerprint =
          CollectiveFingerprint(record.kind, record.step, record.dtype, 0, record.layout);
    }
  }
  std::stable_sort(records.begin(), records.end(),
                   [](const CollectiveRecord& a, const CollectiveRecord& b) {
                     return a.start_unix_ns < b.start_unix_ns;
                   });
  return records;
}

void FlightRecorder::Clear() {
  auto clear = [](Ring& ring) {
    for (size_t i = 0; i < ring.capacity; ++i) {
      ring.slots[i].Lock();
      ring.slots[i].ticket = ~uint64_t{0};
      ring.slots[i].Unlock();
    }
    ring.next.store(0);
  };
  clear(process_ring_);
  for (int r = 0; r < kMaxReplicaRings; ++r) {
    if (Ring* ring = replica_rings_[r].load(std::memory_order_acquire)) clear(*ring);
  }
}

std::string FlightRecorder::ToJson(const std::string& reason) const {
  const std::vector<CollectiveRecord> records = Records();
  nlohmann::json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out["rank"] = rank_;
    out["world_size"] = size_;
    out["host"] = host_;
  }
  out["pid"] = static_cast<int64_t>(getpid());
  out["reason"] = reason;
  out["dumped_unix_ns"] = UnixNs();
  out["current_step"] = CurrentStep();
  out["capacity"] = kCapacity;
  out["replica_capacity"] = kReplicaCapacity;
  nlohmann::json list = nlohmann::json::array();
  for (const CollectiveRecord& record : records) {
    nlohmann::json entry;
    entry["scope"] = record.scope;
    entry["kind"] = record.kind;
    entry["sequence"] = record.sequence;
    entry["step"] = record.step;
    entry["bucket"] = record.bucket;
    entry["replica"] = record.replica;
    entry["bytes"] = record.bytes;
    entry["dtype"] = record.dtype;
    entry["fingerprint"] = Hex(record.fingerprint);
    entry["what"] = record.what;
    entry["start_unix_ns"] = record.start_unix_ns;
    entry["end_unix_ns"] = record.end_unix_ns;
    entry["state"] = StateName(record.state);
    list.push_back(std::move(entry));
  }
  out["records"] = std::move(list);
  return out.dump(1);
}

Status FlightRecorder::Dump(const std::string& reason) {
  const std::string path = DumpPath();
  if (path.empty()) return OkStatus();
  std::lock_guard<std::mutex> lock(dump_mu_);
  const std::string text = ToJson(reason) + "\n";
  TOWER_RETURN_IF_ERROR(WriteFileAtomically(path, "flight recorder: writing " + path,
                                            [&](const AppendBytes& append) {
                                              return append(text.data(), text.size());
                                            }));
  dumped_.store(true);
  return OkStatus();
}

void FlightRecorder::InstallSignalHandlers() {
  if (handlers_installed_.exchange(true)) return;
  if (pipe(signal_pipe) != 0) return;
  std::thread([this] {
    for (;;) {
      unsigned char byte = 0;
      const ssize_t got = read(signal_pipe[0], &byte, 1);
      if (got < 0 && errno == EINTR) continue;
      if (got != 1) return;
      const int signal_number = byte;
      if (signal_number == SIGUSR1 || !dumped_.load()) {
        const Status status = Dump(signal_number == SIGUSR1
                                       ? "SIGUSR1 (the process goes on)"
                                       : "SIGTERM (the process was told to end)");
        if (!status.ok()) std::fprintf(stderr, "%s\n", status.ToString().c_str());
      }
      if (signal_number == SIGTERM) {
        // Ends the process as SIGTERM would have.
        signal(SIGTERM, SIG_DFL);
        kill(getpid(), SIGTERM);
        std::this_thread::sleep_for(std::chrono::seconds(1));
        std::_Exit(128 + SIGTERM);
      }
    }
  }).detach();
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

}  // namespace tower
