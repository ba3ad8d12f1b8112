// Builds without CUDA have no GPU kernels (and no GPU devices to run them on).
#include "ops/kernel_registry.h"

namespace tower {

void RegisterGpuKernels(KernelRegistry& registry) {}

}  // namespace tower
