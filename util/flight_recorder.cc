#include "util/flight_recorder.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "util/fiber.h"
#include "util/file.h"

namespace tower {
namespace {

std::atomic<int64_t> current_step{0};

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

// FNV-1a over bytes, chained.
uint64_t Mix(uint64_t hash, const void* data, size_t size) {
  const unsigned char* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
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

void SetCurrentStep(int64_t step) { current_step.store(step, std::memory_order_relaxed); }
int64_t CurrentStep() { return current_step.load(std::memory_order_relaxed); }

int CurrentBucket() { return BucketSlot().Get() - 1; }
BucketScope::BucketScope(int bucket) : previous_(CurrentBucket()) { BucketSlot().Get() = bucket + 1; }
BucketScope::~BucketScope() { BucketSlot().Get() = previous_ + 1; }

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

FlightRecorder::FlightRecorder() : ring_(new Slot[kCapacity]) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  host_ = host;
  if (const char* directory = std::getenv("TOWER_FLIGHT_RECORDER_DIR")) {
    if (*directory != '\0') directory_ = directory;
  }
  if (!directory_.empty()) InstallSignalHandlers();
}

uint64_t FlightRecorder::Begin(CollectiveRecord record, const std::string& what) {
  if (!what.empty()) {
    const size_t length = std::min(what.size(), sizeof(record.what) - 1);
    std::memcpy(record.what, what.data(), length);
    record.what[length] = '\0';
  }
  record.start_unix_ns = UnixNs();
  record.end_unix_ns = 0;
  record.state = CollectiveState::kInFlight;
  const uint64_t ticket = next_ticket_.fetch_add(1, std::memory_order_relaxed);
  Slot& slot = ring_[ticket % kCapacity];
  slot.Lock();
  slot.ticket = ticket;
  slot.record = record;
  slot.Unlock();
  return ticket;
}

void FlightRecorder::End(uint64_t ticket, CollectiveState state) {
  const int64_t now = UnixNs();
  Slot& slot = ring_[ticket % kCapacity];
  slot.Lock();
  // A record already overwritten by a newer one (the ring went round) is gone.
  if (slot.ticket == ticket) {
    slot.record.end_unix_ns = now;
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
  const uint64_t next = next_ticket_.load(std::memory_order_relaxed);
  const uint64_t first = next > kCapacity ? next - kCapacity : 0;
  for (uint64_t ticket = first; ticket < next; ++ticket) {
    Slot& slot = ring_[ticket % kCapacity];
    slot.Lock();
    // A ticket taken but not written yet, or already overwritten, is left out.
    if (slot.ticket == ticket) records.push_back(slot.record);
    slot.Unlock();
  }
  return records;
}

void FlightRecorder::Clear() {
  for (size_t i = 0; i < kCapacity; ++i) {
    ring_[i].Lock();
    ring_[i].ticket = ~uint64_t{0};
    ring_[i].Unlock();
  }
  next_ticket_.store(0);
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
