#include "device/cuda/cuda_status.h"

#include <string>

#include "util/failed_call.h"

namespace tower {

Status CudaError(cudaError_t error, std::string_view statement, const char* file, int line,
                 std::string_view device) {
  const std::string message =
      FailedCallMessage(statement, file, line, device, cudaGetErrorString(error), cudaGetErrorName(error));
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

void IgnoreCudaError(cudaError_t error) {
  if (error != cudaSuccess) (void)cudaGetLastError();
}

namespace {

// Whether the calling thread has a current CUDA context, asked of the driver
// (cuCtxGetCurrent) without creating one. The runtime API cannot tell: cudaGetDevice says 0
// for a thread that never chose a device. Unknown (no entry point) counts as yes.
bool ThreadHasContext() {
  using CtxGetCurrent = int (*)(void** context);  // CUresult cuCtxGetCurrent(CUcontext*)
  static const CtxGetCurrent get_current = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t error = cudaGetDriverEntryPointByVersion(
        "cuCtxGetCurrent", &function, 12000, cudaEnableDefault, &found);
    IgnoreCudaError(error);
    return error == cudaSuccess && found == cudaDriverEntryPointSuccess
               ? reinterpret_cast<CtxGetCurrent>(function)
               : nullptr;
  }();
  if (get_current == nullptr) return true;
  void* context = nullptr;
  return get_current(&context) != 0 || context != nullptr;
}

}  // namespace

ScopedCudaDevice::ScopedCudaDevice(int ordinal) {
  int current = -1;
  if (ThreadHasContext() && cudaGetDevice(&current) == cudaSuccess) {
    if (current == ordinal) return;  // already there: nothing to switch or restore
    previous_ = current;
  }
  const cudaError_t error = cudaSetDevice(ordinal);
  if (error != cudaSuccess) {
    previous_ = -1;
    status_ = CudaError(error, "cudaSetDevice(ordinal)", __FILE__, __LINE__,
                        "GPU:" + std::to_string(ordinal));
  }
}

ScopedCudaDevice::~ScopedCudaDevice() {
  if (previous_ >= 0) IgnoreCudaError(cudaSetDevice(previous_));
}

}  // namespace tower
