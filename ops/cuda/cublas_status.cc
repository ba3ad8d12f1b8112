#include "ops/cuda/cublas_status.h"

#include <string>

#include "util/failed_call.h"

namespace tower {

Status CublasError(cublasStatus_t status, std::string_view statement, const char* file, int line,
                   std::string_view device) {
  const std::string message = FailedCallMessage(statement, file, line, device,
                                                cublasGetStatusString(status),
                                                cublasGetStatusName(status));
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return ResourceExhaustedError(message);
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return UnavailableError(message);
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return UnimplementedError(message);
    default:
      return InternalError(message);
  }
}

}  // namespace tower
