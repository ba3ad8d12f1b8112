// The process's kernel registry: the CPU kernels and this build's GPU kernels. Kept apart
// from kernel_registry.cc so that the kernel libraries can depend on the registry itself.
#include "ops/kernel_registry.h"

namespace tower {

KernelRegistry& KernelRegistry::Global() {
  static KernelRegistry* const registry = [] {
    auto* r = new KernelRegistry();
    RegisterCpuKernels(*r);
    RegisterGpuKernels(*r);
    return r;
  }();
  return *registry;
}

}  // namespace tower
