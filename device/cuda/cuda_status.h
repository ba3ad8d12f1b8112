// CUDA runtime errors as Status values that carry the failing statement, file:line, the
// device and CUDA's own message, e.g.
//   RESOURCE_EXHAUSTED: cudaMalloc(&ptr, bytes) failed at device/cuda/cuda_platform.cc:97
//   on GPU:0: out of memory (cudaErrorMemoryAllocation)
#ifndef TOWER_DEVICE_CUDA_CUDA_STATUS_H_
#define TOWER_DEVICE_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include <string_view>

#include "util/status.h"

namespace tower {

// Out of memory → ResourceExhausted; no driver / no device → Unavailable; else Internal.
Status CudaError(cudaError_t error, std::string_view statement, const char* file, int line,
                 std::string_view device);

// For a CUDA call whose error is deliberately ignored (cleanup in a destructor, a stream query
// that says cudaErrorNotReady): clears it from the thread's last error, where the runtime
// records it, so that the next launch's cudaGetLastError() does not report it as its own.
void IgnoreCudaError(cudaError_t error);

// Makes `ordinal` the calling thread's current CUDA device and restores the previous one
// when it goes out of scope (CUDA's current device is per thread, and callers own it).
//
// A thread that has no CUDA context yet (it never chose a device) is left on `ordinal`:
// its "previous device" is only cudaGetDevice's default 0, and since CUDA 12 switching to
// it would create a context on GPU 0 — memory taken there by every process of a
// one-GPU-per-process job, and a failure when GPU 0 is in EXCLUSIVE_PROCESS mode.
class ScopedCudaDevice {
 public:
  explicit ScopedCudaDevice(int ordinal);
  ~ScopedCudaDevice();
  ScopedCudaDevice(const ScopedCudaDevice&) = delete;
  ScopedCudaDevice& operator=(const ScopedCudaDevice&) = delete;
  // The result of switching to the device.
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;  // the device to restore, or -1: none
  Status status_;
};

}  // namespace tower

#define TOWER_CUDA_RETURN_IF_ERROR(statement, device)                                  \
  do {                                                                                 \
    const cudaError_t tower_cuda_error_ = (statement);                                 \
    if (tower_cuda_error_ != cudaSuccess) {                                            \
      return ::tower::CudaError(tower_cuda_error_, #statement, __FILE__, __LINE__, device); \
    }                                                                                  \
  } while (0)

#endif  // TOWER_DEVICE_CUDA_CUDA_STATUS_H_
