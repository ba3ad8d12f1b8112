// The emulation's own view, for tests: what a real GPU would show only through a profiler
// or nvidia-smi (contexts created, memory in use, copies staged through the host), and
// fault injection that tests switch on at run time (the environment variables of
// cudaemu/README.md do the same for whole processes).
#ifndef CUDAEMU_TESTING_H_
#define CUDAEMU_TESTING_H_

#include <chrono>
#include <cstdint>

namespace cudaemu::testing {

// Times device `device`'s primary context was created in this process (0 or 1 unless
// cudaDeviceReset destroyed it).
int PrimaryContextsCreated(int device);
// Bytes of `device` in use by allocations (cudaMalloc and library-internal buffers).
uint64_t DeviceBytesInUse(int device);
// Live cudaMalloc allocations on `device`.
int64_t LiveAllocations(int device);
// Copies that went through host memory: cudaMemcpyPeerAsync without peer access enabled,
// and cudaMemcpyAsync from or to pageable (not cudaMallocHost) host memory.
int64_t StagedPeerCopies();
int64_t PageableAsyncCopies();
// Kernel launches so far (every launch, successful or not).
int64_t KernelLaunches();
// Calls that made the host wait for device work: stream, event and device synchronisation,
// and synchronous copies and memsets (cudaMemcpy, cudaMemcpyAsync into pageable memory).
int64_t HostWaits();

// The `nth` cudaMalloc from now (1 = the next) fails with cudaErrorMemoryAllocation.
void FailAllocation(int64_t nth);
// The `nth` kernel launch from now faults: the kernel does not run and the context gets the
// sticky error cudaErrorLaunchFailure.
void FailLaunch(int64_t nth);
// The `nth` kernel launch from now waits, when its stream reaches it, until
// ReleaseHeldLaunch() or until `limit` has passed, holding back everything queued behind it
// on its stream: a test, not the clock, decides when that work may run (a step that returns
// before its last kernel has run is then seen to, whatever the machine's load). One hold at
// a time; a new HoldLaunch replaces the last.
void HoldLaunch(int64_t nth, std::chrono::milliseconds limit);
// Whether the held launch's stream has reached it and waits there.
bool LaunchIsHeld();
// Lets the held launch run (at once if its stream has not reached it yet). False when it had
// already run because its limit passed (also said on stderr).
bool ReleaseHeldLaunch();

}  // namespace cudaemu::testing

#endif  // CUDAEMU_TESTING_H_
