// Eager execution of one op: choose its device (device/placement.h), bring the inputs there
// (copies between any two logical devices), allocate the outputs from the device's
// allocator, run the kernel. Every public op in ops/*_ops.h is a thin function over RunOp.
#ifndef TOWER_OPS_EAGER_H_
#define TOWER_OPS_EAGER_H_

#include <string_view>

#include "device/context.h"
#include "ops/kernel_registry.h"
#include "ops/tensor.h"
#include "util/span.h"

namespace tower {

struct OutputSpec {
  Shape shape;
  DType dtype = DType::kFloat32;
};

struct RunOptions {
  // Context for ops without inputs; ops with inputs use their inputs' context. nullptr:
  // Context::Default() (the global context unless a ScopedDefaultContext says otherwise).
  Context* context = nullptr;
  // Runs on exactly this device, whatever the scope says (ops that update a variable in
  // place must run where the variable is; creation ops given a device).
  Device* pinned = nullptr;
  // Name for the placement log when it differs from the kernel's op ("_EagerConst").
  std::string_view log_name;
};

// Runs `op` on `inputs`, filling `outputs` (one per spec). Fails with the kernel's error,
// the allocator's ResourceExhausted, or a placement error; on failure no output is set.
Status RunOp(const OpKernels& op, Span<const Tensor* const> inputs,
             Span<const OutputSpec> specs, const void* attrs, Span<Tensor* const> outputs,
             const RunOptions& options = RunOptions());

// RunOp for the common case of one output, returned.
StatusOr<Tensor> RunSingle(const OpKernels& op, Span<const Tensor* const> inputs,
                           const OutputSpec& spec, const void* attrs = nullptr,
                           const RunOptions& options = RunOptions());

// The kernels of an op in the global registry (cache the reference in a function-local
// static: `static const OpKernels& kOp = KernelsOf("MatMul");`).
const OpKernels& KernelsOf(std::string_view op);

}  // namespace tower

#endif  // TOWER_OPS_EAGER_H_
