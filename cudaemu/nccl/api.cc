// NCCL's C API over the communicators of comm.h: argument checks, the registry of live
// communicators (a handle is a number, never a pointer dereferenced, so a destroyed one is
// recognised), groups, and the calling thread's last error.
#include <strings.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cudaemu/nccl/comm.h"
#include "cudaemu/nccl/progress.h"
#include "cudaemu/nccl/reduce.h"
#include "cudaemu/nccl_testing.h"

namespace cudaemu::nccl {
namespace {

// ---- errors ------------------------------------------------------------------------------

std::string& LastError() {
  thread_local std::string last;
  return last;
}

ncclResult_t Error(ncclResult_t result, const std::string& text) {
  LastError() = text;
  const char* debug = std::getenv("NCCL_DEBUG");
  if (debug != nullptr && (strcasecmp(debug, "WARN") == 0 || strcasecmp(debug, "INFO") == 0 ||
                           strcasecmp(debug, "TRACE") == 0)) {
    std::fprintf(stderr, "cudaemu:%d NCCL WARN %s\n", static_cast<int>(getpid()), text.c_str());
  }
  return result;
}

std::string Pointer(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

// ---- the registry of live communicators -----------------------------------------------------

constexpr uintptr_t kHandleBase = uintptr_t{0xccc} << 28;
constexpr uintptr_t kHandleStep = 64;

struct Registry {
  std::unordered_map<uintptr_t, std::shared_ptr<Member>> live;
  uintptr_t issued = 0;
  int64_t created = 0;
  int64_t aborted = 0;
};

Registry& GetRegistry() {
  static Registry* const registry = new Registry();  // guarded by Mu(); never destroyed
  return *registry;
}

ncclComm_t RegisterLocked(std::shared_ptr<Member> member) {
  Registry& registry = GetRegistry();
  const uintptr_t handle = kHandleBase + kHandleStep * ++registry.issued;
  registry.live[handle] = std::move(member);
  ++registry.created;
  return reinterpret_cast<ncclComm_t>(handle);
}

ncclComm_t Register(std::shared_ptr<Member> member) {
  std::lock_guard<std::mutex> lock(Mu());
  return RegisterLocked(std::move(member));
}

std::string UnknownComm(ncclComm_t comm, const char* function) {
  const uintptr_t handle = reinterpret_cast<uintptr_t>(comm);
  if (comm == nullptr) return std::string(function) + ": comm is NULL";
  const Registry& registry = GetRegistry();
  if (handle > kHandleBase && (handle - kHandleBase) % kHandleStep == 0 &&
      (handle - kHandleBase) / kHandleStep <= registry.issued) {
    return std::string(function) + ": communicator " + Pointer(comm) +
           " was already destroyed or aborted";
  }
  return std::string(function) + ": " + Pointer(comm) + " is not a communicator";
}

// The live communicator `comm`, or ncclInvalidArgument naming why not.
ncclResult_t Find(ncclComm_t comm, const char* function, std::shared_ptr<Member>* member) {
  std::lock_guard<std::mutex> lock(Mu());
  auto it = GetRegistry().live.find(reinterpret_cast<uintptr_t>(comm));
  if (it == GetRegistry().live.end()) {
    return Error(ncclInvalidArgument, UnknownComm(comm, function));
  }
  *member = it->second;
  return ncclSuccess;
}

// Removes `comm` from the registry; the caller drops the member without Mu() held.
ncclResult_t Unregister(ncclComm_t comm, const char* function, bool abort,
                        std::shared_ptr<Member>* member) {
  std::lock_guard<std::mutex> lock(Mu());
  Registry& registry = GetRegistry();
  auto it = registry.live.find(reinterpret_cast<uintptr_t>(comm));
  if (it == registry.live.end()) return Error(ncclInvalidArgument, UnknownComm(comm, function));
  *member = std::move(it->second);
  registry.live.erase(it);
  if (abort) ++registry.aborted;
  return ncclSuccess;
}

// ---- groups --------------------------------------------------------------------------------

struct Group {
  int depth = 0;
  ncclResult_t error = ncclSuccess;
  std::string error_text;
  std::vector<std::shared_ptr<Member>> blocking_inits;
  std::vector<std::shared_ptr<Member>> nonblocking_inits;
  std::vector<std::pair<Op, std::shared_ptr<internal::Stream>>> ops;
  int blocking = -1;  // of the collectives' communicators: NCCL refuses a mix (-1: none yet)
};

Group& ThreadGroup() {
  thread_local Group group;
  return group;
}

// An error inside a group is returned by the call and again by ncclGroupEnd, which then
// drops the group's collectives.
ncclResult_t GroupError(ncclResult_t result) {
  Group& group = ThreadGroup();
  if (group.depth > 0 && result != ncclSuccess && group.error == ncclSuccess) {
    group.error = result;
    group.error_text = LastError();
  }
  return result;
}

// ---- initialisation --------------------------------------------------------------------------

ncclResult_t InitRank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank, bool blocking,
                      const char* function) {
  if (comm == nullptr) return Error(ncclInvalidArgument, std::string(function) + ": comm is NULL");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return Error(ncclInvalidArgument, std::string(function) + ": rank " + std::to_string(rank) +
                                          " of nranks " + std::to_string(nranks) +
                                          " (0 <= rank < nranks)");
  }
  Rendezvous rendezvous;
  if (!ReadRendezvous(id, &rendezvous)) {
    return Error(ncclInvalidArgument,
                 std::string(function) + ": the unique id was not made by ncclGetUniqueId");
  }
  int device = 0;
  const cudaError_t cuda = internal::CurrentContext(&device);
  if (cuda != cudaSuccess) {
    return Error(ncclUnhandledCudaError,
                 std::string(function) + ": the current device: " + cudaGetErrorString(cuda));
  }
  auto member = std::make_shared<Member>(rank, nranks, device, std::move(rendezvous), blocking);
  StartJoin(member);
  Group& group = ThreadGroup();
  if (group.depth > 0 || !blocking) {
    *comm = Register(member);
    if (group.depth > 0) {
      (blocking ? group.blocking_inits : group.nonblocking_inits).push_back(member);
      return ncclSuccess;
    }
    std::lock_guard<std::mutex> lock(Mu());
    ncclResult_t error;
    std::string reason;
    switch (StateLocked(*member, &error, &reason)) {
      case Phase::kJoining:
        return ncclInProgress;
      case Phase::kReady:
        return ncclSuccess;
      default:
        return Error(error, reason);
    }
  }
  ncclResult_t error;
  std::string reason;
  if (WaitJoined(*member, &error, &reason) != Phase::kReady) {
    Release(*member);
    return Error(error, reason);
  }
  *comm = Register(std::move(member));
  return ncclSuccess;
}

// ---- collectives ------------------------------------------------------------------------------

bool Reduces(Collective collective) {
  return collective == kAllReduce || collective == kReduce || collective == kReduceScatter;
}

ncclResult_t CheckBuffer(const char* function, const char* name, const void* buffer, size_t bytes,
                         const Member& member) {
  if (bytes == 0) return ncclSuccess;
  const int owner = internal::DeviceOf(buffer, bytes);
  if (owner == member.device) return ncclSuccess;
  std::string text = std::string(function) + ": " + name + " " + Pointer(buffer) + " (" +
                     std::to_string(bytes) + " bytes) ";
  text += owner < 0 ? "is not (wholly) device memory"
                    : "is memory of CUDA device " + std::to_string(owner);
  text += "; rank " + std::to_string(member.rank) + " of the communicator is on CUDA device " +
          std::to_string(member.device);
  return Error(ncclInvalidArgument, text);
}

// The stream a collective runs on; NULL is the legacy default stream of the rank's device, as
// NCCL (which makes the communicator's device current) uses it.
ncclResult_t ResolveStreamOf(const Member& member, cudaStream_t handle, const char* function,
                             std::shared_ptr<internal::Stream>* stream) {
  cudaError_t cuda = cudaSuccess;
  if (handle == nullptr) {
    int current = 0;
    cuda = cudaGetDevice(&current);
    if (cuda == cudaSuccess && current != member.device) {
      cuda = cudaSetDevice(member.device);
      if (cuda == cudaSuccess) cuda = internal::ResolveStream(nullptr, stream);
      cudaSetDevice(current);
    } else if (cuda == cudaSuccess) {
      cuda = internal::ResolveStream(nullptr, stream);
    }
  } else {
    cuda = internal::ResolveStream(handle, stream);
  }
  if (cuda != cudaSuccess) {
    return Error(ncclInvalidArgument, std::string(function) + ": stream " + Pointer(handle) + ": " +
                                          cudaGetErrorString(cuda));
  }
  if ((*stream)->device() != member.device) {
    return Error(ncclInvalidArgument, std::string(function) + ": stream " + Pointer(handle) +
                                          " belongs to CUDA device " +
                                          std::to_string((*stream)->device()) + " but rank " +
                                          std::to_string(member.rank) + " is on CUDA device " +
                                          std::to_string(member.device));
  }
  return ncclSuccess;
}

// Enqueues a group's collectives now, or (on non-blocking communicators, when the policy of
// progress.h says so) hands them to the progress thread and returns ncclInProgress.
ncclResult_t Issue(std::vector<std::pair<Op, std::shared_ptr<internal::Stream>>> ops) {
  std::vector<std::shared_ptr<Member>> members;
  for (const auto& [op, stream] : ops) {
    bool seen = false;
    for (const auto& member : members) seen = seen || member == op.member;
    if (!seen) members.push_back(op.member);
  }
  const bool later = ReturnsInProgress(members, Operation::kCollectives);
  {
    std::lock_guard<std::mutex> lock(Mu());
    for (const auto& member : members) member->connected = true;
  }
  if (!later) {
    Enqueue(std::move(ops));
    return ncclSuccess;
  }
  auto shared = std::make_shared<std::vector<std::pair<Op, std::shared_ptr<internal::Stream>>>>(
      std::move(ops));
  IssueLater(members, [shared] { Enqueue(std::move(*shared)); });
  return ncclInProgress;
}

ncclResult_t CollectiveCall(const char* function, Collective collective, const void* send,
                            void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                            ncclComm_t comm, cudaStream_t stream_handle) {
  std::shared_ptr<Member> member;
  if (ncclResult_t r = Find(comm, function, &member); r != ncclSuccess) return GroupError(r);
  const size_t element = TypeSize(type);
  if (element == 0) {
    return GroupError(Error(ncclInvalidArgument, std::string(function) + ": datatype " +
                                                     std::to_string(static_cast<int>(type)) + " (" +
                                                     TypeName(type) + ") is not supported"));
  }
  if (Reduces(collective) && !ValidOp(op)) {
    return GroupError(Error(ncclInvalidArgument, std::string(function) + ": reduction op " +
                                                     std::to_string(static_cast<int>(op)) +
                                                     " is not supported"));
  }
  if ((collective == kBroadcast || collective == kReduce) && (root < 0 || root >= member->nranks)) {
    return GroupError(Error(ncclInvalidArgument, std::string(function) + ": root " +
                                                     std::to_string(root) + " of nranks " +
                                                     std::to_string(member->nranks)));
  }
  const size_t limit =
      std::numeric_limits<size_t>::max() / 4 / element / static_cast<size_t>(member->nranks);
  if (count > limit) {
    return GroupError(Error(ncclInvalidArgument, std::string(function) + ": count " +
                                                     std::to_string(count) + " is too large"));
  }
  {
    std::lock_guard<std::mutex> lock(Mu());
    ncclResult_t error;
    std::string reason;
    if (EnsureReadyLocked(*member, function, &reason) != ncclSuccess) {
      return GroupError(Error(ncclInvalidArgument, reason));
    }
    if (member->finalized) {
      return GroupError(Error(ncclInvalidArgument, std::string(function) +
                                                       ": the communicator was finalized "
                                                       "(ncclCommFinalize)"));
    }
    const Phase phase = StateLocked(*member, &error, &reason);
    if (phase == Phase::kJoining) {
      return GroupError(
          Error(ncclInvalidUsage, std::string(function) +
                                      ": the communicator is still joining "
                                      "(wait until ncclCommGetAsyncError says ncclSuccess)"));
    }
    if (phase == Phase::kFailed) {
      return GroupError(
          Error(error, std::string(function) + ": the communicator failed: " + reason));
    }
  }
  if (count == 0) return ncclSuccess;
  CollHeader header;
  header.collective = collective;
  header.type = type;
  header.op = Reduces(collective) ? op : ncclSum;
  header.root = (collective == kBroadcast || collective == kReduce) ? root : 0;
  header.count = count;
  if (ncclResult_t r =
          CheckBuffer(function, "sendbuff", send,
                      ContributionBytes(header, member->rank, member->nranks), *member);
      r != ncclSuccess) {
    return GroupError(r);
  }
  if (ncclResult_t r = CheckBuffer(function, "recvbuff", recv,
                                   ReceiveBytes(header, member->rank, member->nranks), *member);
      r != ncclSuccess) {
    return GroupError(r);
  }
  std::shared_ptr<internal::Stream> stream;
  if (ncclResult_t r = ResolveStreamOf(*member, stream_handle, function, &stream);
      r != ncclSuccess) {
    return GroupError(r);
  }
  Op pending;
  pending.member = std::move(member);
  pending.header = header;
  pending.send = send;
  pending.recv = recv;
  std::vector<std::pair<Op, std::shared_ptr<internal::Stream>>> ops;
  ops.emplace_back(std::move(pending), std::move(stream));
  Group& group = ThreadGroup();
  if (group.depth > 0) {
    const int blocking = ops.front().first.member->blocking ? 1 : 0;
    if (group.blocking >= 0 && group.blocking != blocking) {
      return GroupError(Error(ncclInvalidArgument,
                              std::string(function) +
                                  ": blocking and non-blocking communicators are not allowed "
                                  "in the same group"));
    }
    group.blocking = blocking;
    group.ops.push_back(std::move(ops.front()));
    return ncclSuccess;
  }
  return Issue(std::move(ops));  // alone, a collective is a group of its own
}

}  // namespace
}  // namespace cudaemu::nccl

using namespace cudaemu::nccl;  // NOLINT: the C API below is the library's surface

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return Error(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) {
    return Error(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  }
  NewRendezvous(/*across_processes=*/true, uniqueId);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  bool blocking = true;
  if (config != nullptr) {
    if (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, cgaClusterSize)) {
      return Error(ncclInvalidArgument,
                   "ncclCommInitRankConfig: config was not set up with NCCL_CONFIG_INITIALIZER");
    }
    blocking = config->blocking == NCCL_CONFIG_UNDEF_INT || config->blocking != 0;
  }
  return InitRank(comm, nranks, commId, rank, blocking, "ncclCommInitRankConfig");
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return InitRank(comm, nranks, commId, rank, /*blocking=*/true, "ncclCommInitRank");
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  if (comm == nullptr) return Error(ncclInvalidArgument, "ncclCommInitAll: comm is NULL");
  if (ndev < 1) {
    return Error(ncclInvalidArgument,
                 "ncclCommInitAll: ndev " + std::to_string(ndev) + " (at least 1)");
  }
  int devices = 0;
  const cudaError_t counted = cudaGetDeviceCount(&devices);
  if (counted != cudaSuccess) {
    return Error(ncclUnhandledCudaError, std::string("ncclCommInitAll: cudaGetDeviceCount: ") +
                                             cudaGetErrorString(counted));
  }
  std::vector<int> list(static_cast<size_t>(ndev));
  for (int i = 0; i < ndev; ++i) {
    list[i] = devlist != nullptr ? devlist[i] : i;
    if (list[i] < 0 || list[i] >= devices) {
      return Error(ncclInvalidArgument, "ncclCommInitAll: devlist[" + std::to_string(i) +
                                            "] = " + std::to_string(list[i]) + " but there are " +
                                            std::to_string(devices) + " CUDA devices");
    }
    const cudaError_t context = cudaemu::internal::EnsureContext(list[i]);
    if (context != cudaSuccess) {
      return Error(ncclUnhandledCudaError, "ncclCommInitAll: CUDA device " +
                                               std::to_string(list[i]) + ": " +
                                               cudaGetErrorString(context));
    }
  }
  ncclUniqueId id;
  NewRendezvous(/*across_processes=*/false, &id);
  Rendezvous rendezvous;
  ReadRendezvous(id, &rendezvous);
  std::vector<std::shared_ptr<Member>> members;
  for (int i = 0; i < ndev; ++i) {
    members.push_back(std::make_shared<Member>(i, ndev, list[i], rendezvous));
    StartJoin(members.back());
  }
  ncclResult_t failure = ncclSuccess;
  std::string reason;
  for (const auto& member : members) {
    ncclResult_t error;
    std::string why;
    if (WaitJoined(*member, &error, &why) != Phase::kReady && failure == ncclSuccess) {
      failure = error;
      reason = why;
    }
  }
  if (failure != ncclSuccess) {
    for (int i = 0; i < ndev; ++i) {
      Release(*members[i]);
      comm[i] = nullptr;
    }
    return Error(failure, "ncclCommInitAll: " + reason);
  }
  std::lock_guard<std::mutex> lock(Mu());
  for (int i = 0; i < ndev; ++i) comm[i] = RegisterLocked(members[i]);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  std::shared_ptr<Member> member;
  if (ncclResult_t r = Unregister(comm, "ncclCommDestroy", /*abort=*/false, &member);
      r != ncclSuccess) {
    return r;
  }
  Release(*member);
  return ncclSuccess;  // the rank leaves once its enqueued collectives are done
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  std::shared_ptr<Member> member;
  if (ncclResult_t r = Find(comm, "ncclCommFinalize", &member); r != ncclSuccess) return r;
  {
    std::lock_guard<std::mutex> lock(Mu());
    std::string reason;
    if (EnsureReadyLocked(*member, "ncclCommFinalize", &reason) != ncclSuccess) {
      return Error(ncclInvalidArgument, reason);
    }
    if (member->finalized) {
      return Error(ncclInvalidArgument, "ncclCommFinalize: the communicator was already finalized");
    }
    member->finalized = true;
  }
  // Collectives already enqueued complete on their streams (flushed); nothing else is left.
  if (ReturnsInProgress({member}, Operation::kFinalize)) {
    IssueLater({member}, [] {});
    return ncclInProgress;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  std::shared_ptr<Member> member;
  if (ncclResult_t r = Unregister(comm, "ncclCommAbort", /*abort=*/true, &member);
      r != ncclSuccess) {
    return r;
  }
  Abort(*member);
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t /*comm*/) { return LastError().c_str(); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (asyncError == nullptr) {
    return Error(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  }
  std::shared_ptr<Member> member;
  if (ncclResult_t r = Find(comm, "ncclCommGetAsyncError", &member); r != ncclSuccess) return r;
  ncclResult_t error;
  std::string reason;
  Phase phase;
  bool issuing = false;
  {
    std::lock_guard<std::mutex> lock(Mu());
    phase = StateLocked(*member, &error, &reason);
    issuing = member->issuing > 0;
  }
  if (phase != Phase::kFailed && issuing) {
    *asyncError = ncclInProgress;  // an operation NCCL's thread has not issued yet
  } else if (phase == Phase::kJoining) {
    *asyncError = ncclInProgress;
  } else if (phase == Phase::kReady) {
    *asyncError = ncclSuccess;
  } else {
    *asyncError = error;
    Error(error, reason);
  }
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (count == nullptr) return Error(ncclInvalidArgument, "ncclCommCount: count is NULL");
  std::shared_ptr<Member> member;
  if (ncclResult_t r = Find(comm, "ncclCommCount", &member); r != ncclSuccess) return r;
  *count = member->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (device == nullptr) return Error(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  std::shared_ptr<Member> member;
  if (ncclResult_t r = Find(comm, "ncclCommCuDevice", &member); r != ncclSuccess) return r;
  *device = member->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (rank == nullptr) return Error(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  std::shared_ptr<Member> member;
  if (ncclResult_t r = Find(comm, "ncclCommUserRank", &member); r != ncclSuccess) return r;
  *rank = member->rank;
  return ncclSuccess;
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return CollectiveCall("ncclReduce", kReduce, sendbuff, recvbuff, count, datatype, op, root, comm,
                        stream);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return CollectiveCall("ncclBcast", kBroadcast, buff, buff, count, datatype, ncclSum, root, comm,
                        stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return CollectiveCall("ncclBroadcast", kBroadcast, sendbuff, recvbuff, count, datatype, ncclSum,
                        root, comm, stream);
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return CollectiveCall("ncclAllReduce", kAllReduce, sendbuff, recvbuff, count, datatype, op, 0,
                        comm, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return CollectiveCall("ncclReduceScatter", kReduceScatter, sendbuff, recvbuff, recvcount,
                        datatype, op, 0, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return CollectiveCall("ncclAllGather", kAllGather, sendbuff, recvbuff, sendcount, datatype,
                        ncclSum, 0, comm, stream);
}

ncclResult_t ncclGroupStart(void) {
  ++ThreadGroup().depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  Group& current = ThreadGroup();
  if (current.depth == 0) {
    return Error(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart to end");
  }
  if (--current.depth > 0) return ncclSuccess;
  Group group = std::move(current);
  current = Group();
  if (group.error != ncclSuccess) {
    return Error(group.error,
                 "ncclGroupEnd: a call of the group failed, so none of its "
                 "collectives ran: " +
                     group.error_text);
  }
  ncclResult_t failure = ncclSuccess;
  std::string reason;
  for (const auto& member : group.blocking_inits) {
    ncclResult_t error;
    std::string why;
    if (WaitJoined(*member, &error, &why) != Phase::kReady && failure == ncclSuccess) {
      failure = error;
      reason = why;
    }
  }
  if (failure != ncclSuccess) return Error(failure, "ncclGroupEnd: " + reason);
  ncclResult_t issued = ncclSuccess;
  if (!group.ops.empty()) issued = Issue(std::move(group.ops));
  std::lock_guard<std::mutex> lock(Mu());
  for (const auto& member : group.nonblocking_inits) {
    ncclResult_t error;
    std::string why;
    if (StateLocked(*member, &error, &why) == Phase::kJoining) return ncclInProgress;
  }
  return issued;
}

}  // extern "C"

namespace cudaemu::testing {

int64_t NcclCommunicatorsCreated() {
  std::lock_guard<std::mutex> lock(Mu());
  return GetRegistry().created;
}

int64_t NcclLiveCommunicators() {
  std::lock_guard<std::mutex> lock(Mu());
  return static_cast<int64_t>(GetRegistry().live.size());
}

int64_t NcclCommunicatorsAborted() {
  std::lock_guard<std::mutex> lock(Mu());
  return GetRegistry().aborted;
}

namespace {

void SetFault(bool stall, int rank, const char* where) {
  Fault fault;
  if (rank >= 0) {
    fault.rank = rank;
    if (!ParseWhere(where, &fault)) {
      std::fprintf(stderr,
                   "cudaemu NCCL: ignoring the fault \"%s\": expected init or "
                   "collective:N\n",
                   where);
      fault = Fault();
    }
  }
  OverrideFault(stall, &fault);
}

}  // namespace

void SetNcclStall(int rank, const char* where) { SetFault(/*stall=*/true, rank, where); }
void SetNcclDie(int rank, const char* where) { SetFault(/*stall=*/false, rank, where); }

bool SetNcclInProgress(const char* policy) { return OverrideInProgressPolicy(policy); }
void HoldNcclProgress(bool held) { HoldProgress(held); }

void ClearNcclFaults() {
  OverrideFault(/*stall=*/true, nullptr);
  OverrideFault(/*stall=*/false, nullptr);
}

}  // namespace cudaemu::testing
