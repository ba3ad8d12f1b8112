// The NCCL emulation's own view, for tests: communicators made, alive and aborted, and fault
// injection switched on at run time.
//
// The environment does the same for whole processes (read when a communicator is made):
//   CUDAEMU_NCCL_STALL=rank[:where]  rank `rank` of a communicator stops responding at `where`:
//       "init" (it never joins) or "collective:N" (its Nth collective, 1-based; the default
//       is collective:1, it never contributes). It stays so until the communicator is aborted
//       (or destroyed).
//   CUDAEMU_NCCL_DIE=rank[:where]    the process SIGKILLs itself when that rank reaches `where`.
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

}  // namespace cudaemu::testing

#endif  // CUDAEMU_NCCL_TESTING_H_
