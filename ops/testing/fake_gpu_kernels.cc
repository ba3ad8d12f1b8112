#include "ops/testing/fake_gpu_kernels.h"

#include "ops/cpu/cpu_kernels.h"
#include "ops/op_names.h"

namespace tower::testing {

void RegisterFakeGpuKernels(KernelRegistry& registry) {
  for (const cpu::NamedKernel& kernel : cpu::AllKernels()) {
    if (op_names::IsCpuOnly(kernel.op)) continue;
    registry.Register(kernel.op, "GPU", "FakeCUDA", kernel.fn);
  }
}

}  // namespace tower::testing
