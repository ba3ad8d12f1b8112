// Mixed-precision policies, as Keras names them: what dtype a layer computes in, its
// variables staying float32.
//
//   float32          everything in float32 (the default)
//   mixed_bfloat16   products and activations in bfloat16, accumulated in float32
//                    (oneDNN's AVX512-BF16 kernels on the CPU: about twice the float32 rate)
//   mixed_float16    the same in float16; on this CPU float16 has no fast kernel and is
//                    emulated (float32 arithmetic on float16 values): it trains as float16
//                    does, at float32's speed. Needs loss scaling against underflow.
//
// Under a mixed policy every Dense layer but the last computes in the 16-bit type (its
// input, its kernel for the step, its activations; the kernel's and bias's gradients come
// out in float32, as their variables are), and the last layer, like a softmax layer,
// computes in float32: Keras's advice, so that the loss and its gradient see float32
// outputs. Variables, optimizer state, gradients and the all-reduce stay float32.
#ifndef TOWER_MODEL_PRECISION_H_
#define TOWER_MODEL_PRECISION_H_

#include <string>
#include <string_view>

#include "ops/dtype.h"
#include "util/statusor.h"

namespace tower {

enum class PrecisionPolicy { kFloat32, kMixedBFloat16, kMixedFloat16 };

// "float32", "mixed_bfloat16", "mixed_float16" (Keras's names).
StatusOr<PrecisionPolicy> ParsePrecisionPolicy(std::string_view name);
std::string_view PrecisionPolicyName(PrecisionPolicy policy);
// The dtype the policy computes in: float32, bfloat16 or float16.
DType ComputeDType(PrecisionPolicy policy);

}  // namespace tower

#endif  // TOWER_MODEL_PRECISION_H_
