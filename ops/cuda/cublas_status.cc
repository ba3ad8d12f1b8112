#include "ops/cuda/cublas_status.h"

#include <string>

namespace tower {

Status CublasError(cublasStatus_t status, std::string_view statement, const char* file, int line,
                   std::string_view device) {
  std::string message(statement);
  message += " failed at ";
  message += file;
  message += ":" + std::to_string(line);
  if (!device.empty()) {
    message += " on ";
    message.append(device.data(), device.size());
  }
  message += ": ";
  message += cublasGetStatusString(status);
  message += " (";
  message += cublasGetStatusName(status);
  message += ")";
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
