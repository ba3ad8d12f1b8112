// Shared by the files of the cuBLAS emulation: the state behind a cublasHandle_t and the
// registry of live handles.
#ifndef CUDAEMU_CUBLAS_HANDLE_H_
#define CUDAEMU_CUBLAS_HANDLE_H_

#include <cublas_v2.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cudaemu/runtime/internal.h"

namespace cudaemu::cublas {

struct Handle {
  const int device;        // the device current at cublasCreate
  const bool tf32_allowed;  // NVIDIA_TF32_OVERRIDE was not "0" at cublasCreate
  const size_t default_workspace_bytes;

  Handle(int device, bool tf32_allowed, size_t default_workspace_bytes)
      : device(device),
        tf32_allowed(tf32_allowed),
        default_workspace_bytes(default_workspace_bytes) {}

  // Calls on one handle may come from several threads (cuBLAS allows it): everything below
  // is guarded by `mu`.
  std::mutex mu;
  bool live = true;  // false once cublasDestroy has begun
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  // The default workspace (nullptr while released), or the user's (cublasSetWorkspace)
  // until cublasSetStream goes back to the default one.
  void* default_workspace = nullptr;
  bool user_workspace = false;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // The last position of this handle's work on each stream it used, for cublasDestroy.
  std::vector<std::pair<std::weak_ptr<internal::Stream>, uint64_t>> queued;

  // Makes sure the default workspace is allocated while it is the one in use.
  cublasStatus_t EnsureDefaultWorkspace();
  // Remembers that this handle's work reaches `position` on `stream`.
  void NoteQueued(const std::shared_ptr<internal::Stream>& stream, uint64_t position);
};

// The live handle behind `handle`, or nullptr (never created, or destroyed).
std::shared_ptr<Handle> Lookup(cublasHandle_t handle);

// Counts every cublasSgemm / cublasSgemm_64 call (cudaemu::testing::CublasGemmCalls).
extern std::atomic<int64_t> gemm_calls;

}  // namespace cudaemu::cublas

#endif  // CUDAEMU_CUBLAS_HANDLE_H_
