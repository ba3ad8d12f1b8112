// Communicators: how ranks meet (rendezvous by unique id, in one process or across the
// processes of one host) and how a collective goes from every rank's stream to the result.
//
// Each communicator has one hub, in the process of its rank 0: it collects every rank's
// contribution to collective #k (a "round"), computes the result in rank order once all are
// there and hands each rank its part. Ranks in the hub's process talk to it directly; ranks
// in other processes through a Unix-domain socket (a Link) whose abstract name is in the
// unique id.
// A rank's collectives are numbered when they are enqueued, so rounds match by number.
//
// All state here is guarded by one mutex, Mu(), and waited for on one condition variable,
// Cv(); data is copied and sockets are written outside it.
#ifndef CUDAEMU_NCCL_COMM_H_
#define CUDAEMU_NCCL_COMM_H_

#include <nccl.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cudaemu/nccl/wire.h"
#include "cudaemu/runtime/internal.h"

namespace cudaemu::nccl {

std::mutex& Mu();
std::condition_variable& Cv();

enum class Phase { kJoining, kReady, kFailed };

enum Collective : int32_t { kAllReduce = 0, kBroadcast, kReduce, kAllGather, kReduceScatter };

// What a rank asked for; every rank must ask for the same in collective #k.
struct CollHeader {
  int32_t collective = kAllReduce;
  int32_t type = ncclFloat32;
  int32_t op = ncclSum;
  int32_t root = 0;
  uint64_t count = 0;  // per rank: AllGather's sendcount, ReduceScatter's recvcount
};
bool operator==(const CollHeader& a, const CollHeader& b);
std::string Describe(const CollHeader& header);
// Bytes rank `rank` contributes; bytes of the whole result; the part of it rank `rank` gets.
size_t ContributionBytes(const CollHeader& header, int rank, int nranks);
size_t ResultBytes(const CollHeader& header, int nranks);
void ResultPart(const CollHeader& header, int rank, int nranks, size_t* offset, size_t* bytes);
// Bytes of the receive buffer the caller must provide (0: not used by this rank).
size_t ReceiveBytes(const CollHeader& header, int rank, int nranks);

// Where a rank stops responding (stall) or kills its process (die).
struct Fault {
  enum Where { kNone, kInit, kCollective };
  Where where = kNone;
  int rank = -1;
  int64_t nth = 1;  // kCollective: the rank's nth collective
};
// "rank", "rank:init", "rank:collective:N"; false when malformed.
bool ParseFault(const std::string& text, Fault* fault);
bool ParseWhere(const char* where, Fault* fault);
// In place of CUDAEMU_NCCL_STALL (stall) or CUDAEMU_NCCL_DIE for communicators made from now
// on; nullptr goes back to the environment.
void OverrideFault(bool stall, const Fault* fault);

// A unique id: a magic, a random token and the rendezvous socket's abstract name (empty:
// ranks of this process only, as ncclCommInitAll makes).
struct Rendezvous {
  std::string token;
  std::string socket_name;
};
void NewRendezvous(bool across_processes, ncclUniqueId* id);
bool ReadRendezvous(const ncclUniqueId& id, Rendezvous* rendezvous);

class Hub;
class Link;

// One rank of a communicator in this process: what a ncclComm_t stands for. Work on streams
// holds it too, so it outlives ncclCommDestroy until its collectives are done.
class Member {
 public:
  Member(int rank, int nranks, int device, Rendezvous rendezvous, bool blocking = true);
  ~Member();  // leaves the communicator (gracefully unless aborted or broken)
  Member(const Member&) = delete;
  Member& operator=(const Member&) = delete;

  const int rank;
  const int nranks;
  const int device;
  const std::string uuid;
  const Rendezvous rendezvous;
  const bool multi_rank_gpu;  // NCCL_MULTI_RANK_GPU_ENABLE=1 when it was made
  const Fault stall;
  const Fault die;
  const bool blocking;  // config.blocking; ncclCommInitAll's communicators are blocking

  // Non-blocking operation state (progress.h). Guarded by Mu().
  int64_t issuing = 0;     // operations that returned ncclInProgress, not yet issued
  bool connected = false;  // its first collectives were issued (NCCL connects peers there)
  bool finalized = false;  // ncclCommFinalize was called
  // Misuse the library saw (a call while an operation was in progress): from then on the
  // communicator's asynchronous error, as NCCL's ncclCommSetAsyncError makes it.
  ncclResult_t usage_error = ncclSuccess;
  std::string usage_reason;

  // Guarded by Mu().
  bool cancelled = false;  // destroyed or aborted: stop joining, end a stall
  bool aborted = false;
  bool stalled = false;
  bool broken = false;  // a collective was never delivered (a stall ended by destroy)
  ncclResult_t init_error = ncclSuccess;
  std::string init_reason;
  std::shared_ptr<Hub> hub;    // when the hub is in this process
  std::shared_ptr<Link> link;  // when it is in another
  int64_t next_seq = 0;        // collectives numbered so far
};

// The rank's state: joining, ready, or failed with `*error` and `*reason`. Needs Mu().
Phase StateLocked(const Member& member, ncclResult_t* error, std::string* reason);

// Starts joining (returns at once; the rank's fault may stall it or end the process).
void StartJoin(const std::shared_ptr<Member>& member);
// Blocks until the rank is no longer joining.
Phase WaitJoined(const Member& member, ncclResult_t* error, std::string* reason);
// ncclCommAbort: ends the rank's collectives at once and fails the communicator for its peers.
void Abort(Member& member);
// ncclCommDestroy: stops joining or a stall; the rank leaves once its collectives are done.
void Release(Member& member);

// One rank's part of a collective.
struct Op {
  std::shared_ptr<Member> member;
  int64_t seq = 0;
  CollHeader header;
  const void* send = nullptr;
  void* recv = nullptr;
};
// Numbers the ops (in order) and enqueues them: one work item per stream, which delivers
// every contribution before waiting for any result (so ranks sharing a stream in one group
// do not wait for each other).
void Enqueue(std::vector<std::pair<Op, std::shared_ptr<internal::Stream>>> ops);

}  // namespace cudaemu::nccl

#endif  // CUDAEMU_NCCL_COMM_H_
