// Kernels for the fake GPUs of device/testing/fake_gpu_platform.h: the CPU kernels (fake GPU
// memory is host memory), registered for device type GPU on platform "FakeCUDA" for every
// op that has a real GPU kernel — all but Cast, which stays CPU-only on purpose.
#ifndef TOWER_OPS_TESTING_FAKE_GPU_KERNELS_H_
#define TOWER_OPS_TESTING_FAKE_GPU_KERNELS_H_

#include "ops/kernel_registry.h"

namespace tower::testing {

// Idempotent.
void RegisterFakeGpuKernels(KernelRegistry& registry = KernelRegistry::Global());

}  // namespace tower::testing

#endif  // TOWER_OPS_TESTING_FAKE_GPU_KERNELS_H_
