// Non-blocking communicators as NCCL runs them: an operation on a communicator made with
// config.blocking = 0 may return ncclInProgress while NCCL's own thread still issues its work
// (connects the peers, enqueues the kernels); ncclCommGetAsyncError says ncclInProgress until
// then, and any other call on that communicator meanwhile is misuse: NCCL refuses it with
// ncclInvalidArgument ("Attempt to use communicator before the previous operation returned
// ncclSuccess", ncclCommEnsureReady) and the error becomes the communicator's asynchronous
// error.
//
// When an operation returns ncclInProgress is NCCL's choice; here CUDAEMU_NCCL_IN_PROGRESS
// chooses (read once per process; cudaemu/nccl_testing.h overrides it):
//   setup (default)  a communicator's first group of collectives, whose connections NCCL
//                    sets up in the background, and every ncclCommFinalize
//   always           every collective, group end and finalize
//   random[:P]       each with probability P (default 0.5), from CUDAEMU_SEED
//   never            none: a non-blocking communicator then behaves as a blocking one
// Blocking communicators never return ncclInProgress.
#ifndef CUDAEMU_NCCL_PROGRESS_H_
#define CUDAEMU_NCCL_PROGRESS_H_

#include <nccl.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cudaemu/nccl/comm.h"

namespace cudaemu::nccl {

enum class Operation { kCollectives, kFinalize };

// Whether this operation on the non-blocking members returns ncclInProgress now.
bool ReturnsInProgress(const std::vector<std::shared_ptr<Member>>& members, Operation operation);

// Counts each member as issuing, then runs `issue` on the progress thread (after a short
// random delay, so that a caller that does not poll sees the window) and counts them done.
void IssueLater(const std::vector<std::shared_ptr<Member>>& members, std::function<void()> issue);

// NCCL's ncclCommEnsureReady: ncclInvalidArgument (recorded as the communicator's asynchronous
// error) when an earlier operation on `member` is still in progress, with `*reason` saying
// so. Needs Mu().
ncclResult_t EnsureReadyLocked(Member& member, const char* function, std::string* reason);

// For tests: the policy as CUDAEMU_NCCL_IN_PROGRESS spells it; nullptr goes back to the
// environment. False (and no change) when `policy` is malformed.
bool OverrideInProgressPolicy(const char* policy);
// For tests: while held, the progress thread issues nothing.
void HoldProgress(bool held);

}  // namespace cudaemu::nccl

#endif  // CUDAEMU_NCCL_PROGRESS_H_
