// MpiWorld: this process's place among the workers launched by Open MPI's mpirun, and the
// cross-process collectives of MultiWorkerMirroredStrategy, on host memory.
//
// Every collective has a deadline and never hangs: the workers first announce their
// arrival to each other (one small message per peer, tagged with the collective's sequence
// number), and a worker that is missing when the deadline passes is named in the error
// ("rank 2 (host b) never reached collective 17: all-reduce of 6 tensors"). A collective
// that all workers entered but that stalls (a worker or its host died, a link went down
// mid-transfer) is followed by a short probe among the workers, so the error names the ones
// that stopped answering ("rank 2 (host b) stopped answering during collective 17"); so is
// a worker that never arrives, which may be alive but behind (stuck in an earlier collective
// that a dead worker's data completed for some survivors only): only the silent are named
// unreachable.
// Workers that reach different collectives (diverged code paths) are reported too. A worker
// that fails should exit non-zero (AbortJob): it then prints the workers it found
// unreachable as a report line for a supervisor (strategy/collectives/mpi/worker_report.h).
//
// MPI is process-wide by nature, so this is the one process-wide object of the strategy
// layer; it calls MPI only from the thread that uses it (MPI_THREAD_SERIALIZED).
#ifndef TOWER_STRATEGY_COLLECTIVES_MPI_MPI_WORLD_H_
#define TOWER_STRATEGY_COLLECTIVES_MPI_MPI_WORLD_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "strategy/runtime/world.h"
#include "util/statusor.h"

namespace tower {

class MpiWorld : public World {
 public:
  // Initialises MPI (or adopts an MPI the program initialised) on first use. Fails with
  // Unavailable when MPI cannot start.
  static StatusOr<MpiWorld*> Get();
  // Whether this process was started by mpirun (Open MPI's environment is present).
  static bool LaunchedByMpirun();

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& host() const { return hosts_[rank_]; }
  // "rank 2 (host b)".
  std::string Describe(int rank) const override;

  // In-place sum of `count` floats over all workers.
  Status AllReduceSum(float* data, int64_t count, std::chrono::milliseconds timeout,
                      const std::string& what) override;
  // The same, for tensors whose shapes hash to `layout`: workers whose shapes differ (or
  // whose steps differ) are told apart before any data moves (a mismatch error naming the
  // fingerprints), instead of summing unrelated floats.
  Status AllReduceSum(float* data, int64_t count, uint64_t layout,
                      std::chrono::milliseconds timeout, const std::string& what);
  // Worker q gets send_counts[q] floats from `send` + send_offsets[q]; the floats from worker
  // p land at `receive` + receive_offsets[p] (receive_counts[p] of them). MPI_Alltoallv.
  Status AllToAll(const float* send, const std::vector<int>& send_counts,
                  const std::vector<int>& send_offsets, float* receive,
                  const std::vector<int>& receive_counts, const std::vector<int>& receive_offsets,
                  std::chrono::milliseconds timeout, const std::string& what);
  // Worker p's counts[p] floats at `data` + offsets[p] go to every worker (in place: each
  // worker's own part is already there). MPI_Allgatherv.
  Status AllGatherInPlace(float* data, const std::vector<int>& counts,
                          const std::vector<int>& offsets, std::chrono::milliseconds timeout,
                          const std::string& what);
  // The same two with 16-bit elements (bfloat16 or float16 bits: the reduced-precision
  // all-reduce's wire format).
  Status AllToAll(const uint16_t* send, const std::vector<int>& send_counts,
                  const std::vector<int>& send_offsets, uint16_t* receive,
                  const std::vector<int>& receive_counts, const std::vector<int>& receive_offsets,
                  std::chrono::milliseconds timeout, const std::string& what);
  Status AllGatherInPlace(uint16_t* data, const std::vector<int>& counts,
                          const std::vector<int>& offsets, std::chrono::milliseconds timeout,
                          const std::string& what);
  // `bytes` bytes from `root` to everyone.
  Status Broadcast(void* data, int64_t bytes, int root, std::chrono::milliseconds timeout,
                   const std::string& what);
  // Every worker's string, in rank order.
  StatusOr<std::vector<std::string>> AllGather(const std::string& mine,
                                               std::chrono::milliseconds timeout,
                                               const std::string& what) override;

  // Ends every worker (MPI_Abort), after a failure this worker cannot recover from. Where a
  // collective failed here, first waits 1 s so that the others, which fail at it too, write
  // their flight recorder files. Prints the report line naming the workers found
  // unreachable, if any.
  [[noreturn]] void AbortJob(int exit_code) override;
  // The workers this one gave up on (never arrived, or stopped answering), in rank order.
  std::vector<int> unreachable() const;

 private:
  MpiWorld() = default;
  // The element types of AllToAll and AllGatherInPlace (the header does not include mpi.h).
  enum class Element { kFloat, kUInt16 };
  Status AllToAllOf(const void* send, const std::vector<int>& send_counts,
                    const std::vector<int>& send_offsets, void* receive,
                    const std::vector<int>& receive_counts,
                    const std::vector<int>& receive_offsets, Element element,
                    std::chrono::milliseconds timeout, const std::string& what);
  Status AllGatherInPlaceOf(void* data, const std::vector<int>& counts,
                            const std::vector<int>& offsets, Element element,
                            std::chrono::milliseconds timeout, const std::string& what);
  // Starts collective number sequence_ + 1 of `kind`: records it in the flight recorder
  // (strategy/collectives/flight_recorder.h) and returns its fingerprint (of kind, step, dtype, `elements`
  // and `layout`; pass elements 0 where workers legitimately send different counts).
  uint64_t BeginCollective(const char* kind, const char* dtype, int64_t elements,
                           uint64_t layout, int64_t bytes, const std::string& what);
  // Ends the collective BeginCollective started; on failure, writes the flight recorder's
  // ring (the error is the reason). Returns `status`.
  Status EndCollective(const Status& status);
  // All workers are at this collective with the same fingerprint, or DeadlineExceeded
  // naming the missing ones, or FailedPrecondition naming the workers that diverged.
  Status Arrive(std::chrono::milliseconds timeout, const std::string& what, uint64_t fingerprint);
  // Arrive's messages in flight, one receive and one send per peer (mpi_world.cc: the MPI
  // types stay out of this header).
  struct Arrivals;
  // Posts the receive of every peer's arrival and the send of this one's {sequence,
  // fingerprint} (arrive_token_).
  Status PostArrivals(uint64_t fingerprint, Arrivals& arrivals);
  // One pass over the peers: notes the sends and arrivals completed, and fails on an MPI
  // error (Unreachable) or a peer that diverged (CheckArrival).
  Status PollArrivals(uint64_t fingerprint, const std::string& what, Arrivals& arrivals);
  // Marks `peer` unreachable: the Unavailable of an MPI error `code` on its link.
  Status Unreachable(int peer, uint64_t sequence, const std::string& what, int code);
  // FailedPrecondition when a peer's arrival is at another collective or fingerprint.
  Status CheckArrival(int peer, uint64_t their_sequence, uint64_t their_fingerprint,
                      uint64_t sequence, uint64_t fingerprint, const std::string& what) const;
  // At half the deadline: the warning naming the peers not through yet.
  void WarnLateArrivals(const Arrivals& arrivals, const std::string& what,
                        std::chrono::milliseconds timeout) const;
  // At the deadline: cancels what is in flight, probes the missing peers, marks the silent
  // ones unreachable, and returns the DeadlineExceeded naming them all.
  Status MissedArrivals(const std::string& what, std::chrono::milliseconds timeout,
                        Arrivals& arrivals);
  // Waits for a non-blocking MPI request with a deadline; on a stall or an MPI error, names
  // the workers that stopped answering (Probe).
  Status Wait(void* request, std::chrono::milliseconds timeout, const std::string& what);
  // Every worker whose collective stalled sends every other a probe and waits up to
  // `window` for theirs: the peers whose probe never came, in rank order. The survivors of
  // a stalled collective reach their deadlines together (they all passed its Arrive), so
  // they hear each other; a dead or cut-off worker stays silent.
  std::vector<int> Probe(std::chrono::milliseconds window);
  // AllGather once BeginCollective has run.
  StatusOr<std::vector<std::string>> AllGatherArrived(const std::string& mine,
                                                      std::chrono::milliseconds timeout,
                                                      const std::string& what,
                                                      uint64_t fingerprint);
  void MarkUnreachable(const std::vector<int>& ranks);

  int rank_ = 0;
  int size_ = 1;
  std::vector<std::string> hosts_;
  uint64_t sequence_ = 0;
  std::mutex mu_;  // one collective at a time from this process
  // Probe's buffers: members, since a probe to a dead peer may never complete and the job
  // ends without freeing them.
  uint64_t probe_token_ = 0;
  // What Arrive sends: a member, since a send to a peer that died is never completed (it is
  // cancelled and freed, and MPI may still read its buffer afterwards).
  // {sequence, fingerprint}.
  uint64_t arrive_token_[2] = {0, 0};
  // The flight recorder's ticket of the collective in progress.
  uint64_t record_ticket_ = 0;
  // The collective in progress, for its trace event (start 0: no trace was running).
  const char* record_kind_ = "";
  int64_t record_bytes_ = 0;
  int64_t record_start_ns_ = 0;
  // Whether a failure already wrote the flight recorder's ring (AbortJob then keeps it).
  bool dumped_failure_ = false;
  std::vector<uint64_t> probe_received_;
  mutable std::mutex unreachable_mu_;
  std::vector<int> unreachable_;  // guarded by unreachable_mu_
};

}  // namespace tower

#endif  // TOWER_STRATEGY_COLLECTIVES_MPI_MPI_WORLD_H_
