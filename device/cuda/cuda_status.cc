#include "device/cuda/cuda_status.h"

#include <string>

namespace tower {

Status CudaError(cudaError_t error, std::string_view statement, const char* file, int line,
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
  message += cudaGetErrorString(error);
  message += " (";
  message += cudaGetErrorName(error);
  message += ")";
  switch (error) {
    case cudaErrorMemoryAllocation:
      return ResourceExhaustedError(message);
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
      return UnavailableError(message);
    default:
      return InternalError(message);
  }
}

ScopedCudaDevice::ScopedCudaDevice(int ordinal) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  const cudaError_t error = cudaSetDevice(ordinal);
  if (error != cudaSuccess) {
    status_ = CudaError(error, "cudaSetDevice(ordinal)", __FILE__, __LINE__,
                        "GPU:" + std::to_string(ordinal));
  }
}

ScopedCudaDevice::~ScopedCudaDevice() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

}  // namespace tower
