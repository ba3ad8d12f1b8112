// The calling thread's last error, sticky errors, and CUDA's error strings.
#include <cuda_runtime_api.h>

#include "cudaemu/runtime/core.h"

namespace cudaemu::internal {
namespace {
thread_local cudaError_t last_error = cudaSuccess;

// The sticky error of the thread's current device, if its context exists.
cudaError_t CurrentSticky() {
  DeviceState* state = Device(CurrentDeviceOrZero());
  return state == nullptr ? cudaSuccess : static_cast<cudaError_t>(state->sticky.load());
}
}  // namespace

cudaError_t Record(cudaError_t error) {
  if (error != cudaSuccess) last_error = error;
  return error;
}

void SetSticky(int device, cudaError_t error) {
  DeviceState* state = Device(device);
  if (state == nullptr || error == cudaSuccess) return;
  int expected = cudaSuccess;
  state->sticky.compare_exchange_strong(expected, error);  // the first fault wins
}

cudaError_t Sticky(int device) {
  DeviceState* state = Device(device);
  return state == nullptr ? cudaSuccess : static_cast<cudaError_t>(state->sticky.load());
}

}  // namespace cudaemu::internal

using cudaemu::internal::CurrentSticky;
using cudaemu::internal::last_error;

extern "C" {

cudaError_t cudaGetLastError(void) {
  const cudaError_t sticky = CurrentSticky();
  if (sticky != cudaSuccess) return sticky;  // a corrupted context cannot be cleared
  const cudaError_t error = last_error;
  last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError(void) {
  const cudaError_t sticky = CurrentSticky();
  return sticky != cudaSuccess ? sticky : last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define CUDAEMU_NAME(e) \
  case e:               \
    return #e;
    CUDAEMU_NAME(cudaSuccess)
    CUDAEMU_NAME(cudaErrorInvalidValue)
    CUDAEMU_NAME(cudaErrorMemoryAllocation)
    CUDAEMU_NAME(cudaErrorInitializationError)
    CUDAEMU_NAME(cudaErrorCudartUnloading)
    CUDAEMU_NAME(cudaErrorInvalidConfiguration)
    CUDAEMU_NAME(cudaErrorInvalidDevicePointer)
    CUDAEMU_NAME(cudaErrorInvalidMemcpyDirection)
    CUDAEMU_NAME(cudaErrorInsufficientDriver)
    CUDAEMU_NAME(cudaErrorDevicesUnavailable)
    CUDAEMU_NAME(cudaErrorNoDevice)
    CUDAEMU_NAME(cudaErrorInvalidDevice)
    CUDAEMU_NAME(cudaErrorDeviceUninitialized)
    CUDAEMU_NAME(cudaErrorPeerAccessUnsupported)
    CUDAEMU_NAME(cudaErrorInvalidResourceHandle)
    CUDAEMU_NAME(cudaErrorSymbolNotFound)
    CUDAEMU_NAME(cudaErrorNotReady)
    CUDAEMU_NAME(cudaErrorIllegalAddress)
    CUDAEMU_NAME(cudaErrorLaunchOutOfResources)
    CUDAEMU_NAME(cudaErrorLaunchTimeout)
    CUDAEMU_NAME(cudaErrorPeerAccessAlreadyEnabled)
    CUDAEMU_NAME(cudaErrorPeerAccessNotEnabled)
    CUDAEMU_NAME(cudaErrorSetOnActiveProcess)
    CUDAEMU_NAME(cudaErrorContextIsDestroyed)
    CUDAEMU_NAME(cudaErrorAssert)
    CUDAEMU_NAME(cudaErrorLaunchFailure)
    CUDAEMU_NAME(cudaErrorNotSupported)
    CUDAEMU_NAME(cudaErrorUnknown)
#undef CUDAEMU_NAME
  }
  return "unrecognized error code";
}

// CUDA's own texts.
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorCudartUnloading: return "driver shutting down";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorDevicesUnavailable: return "CUDA-capable device(s) is/are busy or unavailable";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorDeviceUninitialized: return "invalid device context";
    case cudaErrorPeerAccessUnsupported:
      return "peer access is not supported between these two devices";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorSymbolNotFound: return "named symbol not found";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchTimeout: return "the launch timed out and was terminated";
    case cudaErrorPeerAccessAlreadyEnabled: return "peer access is already enabled";
    case cudaErrorPeerAccessNotEnabled: return "peer access has not been enabled";
    case cudaErrorSetOnActiveProcess: return "cannot set while device is active in this process";
    case cudaErrorContextIsDestroyed: return "context is destroyed";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorUnknown: return "unknown error";
  }
  return "unrecognized error code";
}

}  // extern "C"
