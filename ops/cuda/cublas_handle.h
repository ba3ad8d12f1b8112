// The cuBLAS handle of a logical GPU. Each logical device owns one (two logical GPUs of one
// card must not share one: a handle is bound to one stream), made on the first MatMul with:
// the device's stream bound, true FP32 math (no TF32), and a workspace taken from the
// device's own allocator, so it counts against the logical device's memory limit instead of
// being allocated by cuBLAS behind the limit's back. Handle and workspace are released with
// the device (Device::GetOrCreateResource).
#ifndef TOWER_OPS_CUDA_CUBLAS_HANDLE_H_
#define TOWER_OPS_CUDA_CUBLAS_HANDLE_H_

#include <cublas_v2.h>

#include "device/device.h"
#include "util/statusor.h"

namespace tower {

// The handle of `device`, whose CUDA ordinal must be the calling thread's current device.
StatusOr<cublasHandle_t> CublasHandleFor(Device& device);

}  // namespace tower

#endif  // TOWER_OPS_CUDA_CUBLAS_HANDLE_H_
