// FlightRecorder: the last collectives of this process, kept in a fixed-size ring, written
// to a file when something goes wrong, so that `tower doctor` can read every rank's file
// and say who diverged (PyTorch's NCCL flight recorder, for every path).
//
// Every collective is recorded from its start to its end: the workers' collectives (their
// sequence number is MpiWorld's, the same on every rank for the same collective) and each
// replica's in-process sums (numbered per replica). Recording is always on and allocates
// nothing (a record is a fixed-size struct; the ring is made once).
//
// The ring is written to DIR/flight_recorder.rank<R>.json (atomically, replacing an earlier
// dump) when a collective misses its deadline, when the workers diverge, when the job is
// aborted, and on SIGUSR1 (the process goes on) or SIGTERM (it then ends, as mpirun's abort
// of a job sends it). DIR is SetDumpDirectory's, else $TOWER_FLIGHT_RECORDER_DIR; with
// neither, nothing is written.
#ifndef TOWER_STRATEGY_COLLECTIVES_FLIGHT_RECORDER_H_
#define TOWER_STRATEGY_COLLECTIVES_FLIGHT_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "util/cache_line.h"
#include "util/status.h"

namespace tower {

// The training step this process is running (1-based; 0: none), for flight records and
// collective fingerprints: the training loop sets it before each step.
void SetCurrentStep(int64_t step);
int64_t CurrentStep();

// The gradient bucket the running thread or replica fiber is summing (-1: none), set by the
// gradient reducer around each bucket's sum so that the collectives beneath it know it.
int CurrentBucket();
class BucketScope {
 public:
  explicit BucketScope(int bucket);
  ~BucketScope() { *slot_ = previous_; }
  BucketScope(const BucketScope&) = delete;
  BucketScope& operator=(const BucketScope&) = delete;

 private:
  int* slot_;  // this fiber's or thread's bucket, stored plus one
  int previous_;
};

enum class CollectiveState : uint8_t { kInFlight, kDone, kFailed };

struct CollectiveRecord {
  // "workers": a collective of every worker (sequence shared by all ranks); "replicas": one
  // replica's in-process sum (sequence counted per replica).
  const char* scope = "workers";
  const char* kind = "";  // "all-reduce", "all-gather", "all-to-all", "broadcast", ...
  uint64_t sequence = 0;
  int64_t step = 0;
  int32_t bucket = -1;
  int32_t replica = -1;   // local replica; -1: the process
  int64_t bytes = 0;      // this process's payload
  const char* dtype = "float32";
  // Of kind, step, dtype and every shape (CollectiveFingerprint). A replica's sum leaves it
  // 0 and gives its shapes' hash in `layout`: Records() computes it, off the step's path.
  uint64_t fingerprint = 0;
  uint64_t layout = 0;
  char what[112] = {0};      // how errors describe it ("all-reduce of 6 tensors (26 floats)")
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  CollectiveState state = CollectiveState::kInFlight;
};

// The fingerprint workers compare before a collective: equal on every worker that runs the
// same collective of the same step with the same shapes. `layout`: a hash of the shapes
// (0 when the caller has only an element count, which `elements` then covers).
uint64_t CollectiveFingerprint(const char* kind, int64_t step, const char* dtype,
                               int64_t elements, uint64_t layout);

class FlightRecorder {
 public:
  // The last kCapacity collectives of the process (the workers' collectives, and records
  // without a replica), and the last kReplicaCapacity sums of each replica, each replica in
  // a ring of its own (replicas record at the same moments: one shared counter would bounce
  // between their cores every bucket). Replica rings are made at a replica's first record.
  static constexpr size_t kCapacity = 2048;
  static constexpr size_t kReplicaCapacity = 256;
  static constexpr int kMaxReplicaRings = 1024;
  static FlightRecorder& Get();

  // Records the start of a collective (its start time is taken here: to the nanosecond for
  // a process's collectives, to the kernel's tick, a few ms, for a replica's sums, which
  // every step makes; `what` is cut to fit): returns the ticket End takes.
  uint64_t Begin(const CollectiveRecord& record, const std::string& what = std::string());
  void End(uint64_t ticket, CollectiveState state);

  // Who this process is, for the file's name and contents (MpiWorld sets it).
  void SetProcess(int rank, int size, const std::string& host);
  // Where dumps go ("" : $TOWER_FLIGHT_RECORDER_DIR, or nowhere). Installs the SIGUSR1 and
  // SIGTERM handlers the first time a directory is known.
  void SetDumpDirectory(const std::string& directory);
  std::string dump_directory() const;
  // The file this rank dumps to ("" when there is no directory).
  std::string DumpPath() const;

  // Writes the ring (oldest first) and `reason` to DumpPath(); OK and nothing written
  // without a directory. Safe from any thread; concurrent dumps take turns.
  Status Dump(const std::string& reason);
  // The dump's contents (JSON).
  std::string ToJson(const std::string& reason) const;
  // The records in the rings, oldest first (by start time; the ring's order among equals).
  std::vector<CollectiveRecord> Records() const;
  // Forgets every record (tests).
  void Clear();

 private:
  FlightRecorder();
  void InstallSignalHandlers();

  // A record and the ticket it was begun with, behind a lock of its own: only a dump reads
  // a slot that another thread writes.
  struct Slot {
    std::atomic<bool> busy{false};
    uint64_t ticket = ~uint64_t{0};  // none
    CollectiveRecord record;
    void Lock();
    void Unlock() { busy.store(false, std::memory_order_release); }
  };
  struct Ring {
    explicit Ring(size_t capacity) : slots(new Slot[capacity]), capacity(capacity) {}
    alignas(kCacheLineBytes) std::atomic<uint64_t> next{0};  // records ever begun here
    std::unique_ptr<Slot[]> slots;
    size_t capacity;
  };
  // Ring 0 is the process's; ring r + 1 replica r's (beyond kMaxReplicaRings, the process's).
  Ring& RingFor(int replica);
  // Tickets carry their ring in the top 16 bits.
  static constexpr int kRingShift = 48;

  Ring process_ring_{kCapacity};
  std::unique_ptr<std::atomic<Ring*>[]> replica_rings_;  // kMaxReplicaRings, made lazily
  std::mutex rings_mu_;                                  // making a replica's ring
  mutable std::mutex mu_;                                // the process's identity and directory
  int rank_ = 0;
  int size_ = 1;
  std::string host_;
  std::string directory_;
  std::mutex dump_mu_;
  std::atomic<bool> handlers_installed_{false};
  // Whether a dump was written: SIGTERM (mpirun ending a job another worker aborted) then
  // keeps the file, whose reason says more.
  std::atomic<bool> dumped_{false};
};

// Begin in the constructor, End in the destructor: kDone unless Fail() was called or the
// scope is left by an early return after a failure was noted with Fail.
class RecordedCollective {
 public:
  RecordedCollective(const CollectiveRecord& record, const std::string& what = std::string())
      : ticket_(FlightRecorder::Get().Begin(record, what)) {}
  ~RecordedCollective() { FlightRecorder::Get().End(ticket_, state_); }
  RecordedCollective(const RecordedCollective&) = delete;
  RecordedCollective& operator=(const RecordedCollective&) = delete;
  // Marks the collective failed (or, with ok, done) at the end of the scope.
  void Finish(bool ok) { state_ = ok ? CollectiveState::kDone : CollectiveState::kFailed; }

 private:
  uint64_t ticket_;
  CollectiveState state_ = CollectiveState::kFailed;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_COLLECTIVES_FLIGHT_RECORDER_H_
