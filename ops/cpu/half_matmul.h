// Matrix products of 16-bit matrices on the CPU, accumulated in float32: the products of the
// mixed-precision policies (model/precision.h).
//
// bfloat16 runs on oneDNN's AVX512-BF16 kernels (VDPBF16PS: two bf16 products per float32
// lane per instruction, about twice the float32 rate here); float16 has no fast kernel on
// this CPU and is emulated: the operands are widened to float32 (a product of two float16
// values is exact in float32) and multiplied in float32. The output is float32 or the
// inputs' 16-bit type (rounded once, to nearest even).
#ifndef TOWER_OPS_CPU_HALF_MATMUL_H_
#define TOWER_OPS_CPU_HALF_MATMUL_H_

#include <cstdint>

#include "ops/tensor.h"
#include "util/status.h"

namespace tower::cpu {

// c[m, n] = op(a) · op(b), a and b both bfloat16 or both float16 (row-major; op transposes
// when asked), c float32 or of a's dtype. Split by columns over the call's intra-op threads
// (device/intra_op.h), each block one single-threaded oneDNN product: the result is the
// same bits run to run for a given thread count.
Status HalfMatMul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                  Tensor& c);

}  // namespace tower::cpu

#endif  // TOWER_OPS_CPU_HALF_MATMUL_H_
