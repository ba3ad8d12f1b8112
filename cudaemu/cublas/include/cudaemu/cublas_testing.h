// The cuBLAS emulation's own view, for tests: what a real GPU would show only through a
// profiler or nvidia-smi.
#ifndef CUDAEMU_CUBLAS_TESTING_H_
#define CUDAEMU_CUBLAS_TESTING_H_

#include <cstdint>

namespace cudaemu::testing {

// cuBLAS handles created and not yet destroyed, on all devices.
int64_t CublasLiveHandles();
// Bytes of `device` held by cuBLAS's default workspaces (those of live handles that have
// not replaced theirs with cublasSetWorkspace). Part of DeviceBytesInUse(device).
uint64_t CublasInternalWorkspaceBytes(int device);
// Calls to cublasSgemm and cublasSgemm_64 so far, whatever their outcome.
int64_t CublasGemmCalls();

}  // namespace cudaemu::testing

#endif  // CUDAEMU_CUBLAS_TESTING_H_
