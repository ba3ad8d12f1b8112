// cuBLAS errors as Status values in the form of device/cuda/cuda_status.h's CudaError:
//   INTERNAL: cublasSgemm_64(...) failed at ops/cuda/cuda_kernels.cc:120 on
//   /job:localhost/replica:0/task:0/device:GPU:0: an invalid value was used as an argument
//   (CUBLAS_STATUS_INVALID_VALUE)
#ifndef TOWER_OPS_CUDA_CUBLAS_STATUS_H_
#define TOWER_OPS_CUDA_CUBLAS_STATUS_H_

#include <cublas_v2.h>

#include <string_view>

#include "util/status.h"

namespace tower {

// Allocation failures → ResourceExhausted; an uninitialised library or a GPU that lacks
// what the call needs → Unavailable; an unsupported request → Unimplemented; anything
// else → Internal.
Status CublasError(cublasStatus_t status, std::string_view statement, const char* file, int line,
                   std::string_view device);

}  // namespace tower

#define TOWER_CUBLAS_RETURN_IF_ERROR(statement, device)                                          \
  do {                                                                                           \
    const cublasStatus_t tower_cublas_status_ = (statement);                                     \
    if (tower_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                         \
      return ::tower::CublasError(tower_cublas_status_, #statement, __FILE__, __LINE__, device); \
    }                                                                                            \
  } while (0)

#endif  // TOWER_OPS_CUDA_CUBLAS_STATUS_H_
