// The NCCL emulation's own view, for tests: communicators made, alive and aborted, and fault
// injection switched on at run time.
//
// The environment does the same for whole processes (read when a communicator is made):
//   CUDAEMU_NCCL_STALL=rank[:where]  rank `rank` of a communicator stops responding at `where`:
//       "init" (it never joins) or "collective:N" (its Nth collective, 1-based; the default
//       is collective:1, it never contributes). It stays so until the communicator is aborted
//       (or destroyed).
//   CUDAEMU_NCCL_DIE=rank[:where]    the process SIGKILLs itself when that rank reaches `where`.
//   CUDAEMU_NCCL_IN_PROGRESS=setup|always|never|random[:P]  when an operation on a
//       non-blocking communicator returns ncclInProgress while the emulation's progress thread
//       issues its work later: setup (default) for a communicator's first collectives and
//       every ncclCommFinalize, as NCCL connects peers then; always; never; or at random with
//       probability P (default 0.5) from CUDAEMU_SEED. Read once per process.
// "rank" is the rank in the communicator, so every communicator made with the variable set
// has the fault.
#ifndef CUDAEMU_NCCL_TESTING_H_
#define CUDAEMU_NCCL_TESTING_H_

#include <cstdint>

namespace cudaemu::testing {

// Communicators handed out by ncclCommInitRank(Config)/ncclCommInitAll in this process.
int64_t NcclCommunicatorsCreated();
// Of those, the ones neither destroyed nor aborted.
int64_t NcclLiveCommunicators();
// ncclCommAbort calls on live communicators.
int64_t NcclCommunicatorsAborted();

// Fault injection for communicators made from now on, in place of the environment variables
// above: `where` as there ("init", "collective:N"; nullptr means "collective:1"). A negative
// rank switches the fault off (and the environment variable stays ignored);
// ClearNcclFaults() goes back to the environment.
void SetNcclStall(int rank, const char* where = nullptr);
void SetNcclDie(int rank, const char* where = nullptr);
void ClearNcclFaults();

// In place of CUDAEMU_NCCL_IN_PROGRESS from now on (its values); nullptr goes back to the
// environment. False, and nothing changed, for a malformed policy.
bool SetNcclInProgress(const char* policy);
// While held, operations that returned ncclInProgress stay unissued (ncclCommGetAsyncError
// keeps saying ncclInProgress): what a caller does in that window is seen without timing.
void HoldNcclProgress(bool held);

}  // namespace cudaemu::testing

#endif  // CUDAEMU_NCCL_TESTING_H_
