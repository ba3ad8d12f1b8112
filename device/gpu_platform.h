// The GPU platform of this build: CUDA under --config=cuda, otherwise a stub with no
// devices whose status() says to rebuild with --config=cuda. The BUILD file picks the
// implementation (device/cuda/cuda_platform.cc or device/gpu_platform_stub.cc).
#ifndef TOWER_DEVICE_GPU_PLATFORM_H_
#define TOWER_DEVICE_GPU_PLATFORM_H_

#include <memory>

#include "device/platform.h"

namespace tower {

std::unique_ptr<Platform> CreateGpuPlatform();

// Whether this binary was built with CUDA (--config=cuda).
bool GpuPlatformCompiledIn();

}  // namespace tower

#endif  // TOWER_DEVICE_GPU_PLATFORM_H_
