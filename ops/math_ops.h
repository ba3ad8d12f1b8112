// Math ops, eager: each places itself (device/placement.h), copies inputs if needed, and
// returns a new tensor on the device it ran on. Inputs are float32.
#ifndef TOWER_OPS_MATH_OPS_H_
#define TOWER_OPS_MATH_OPS_H_

#include <vector>

#include "ops/op_attrs.h"
#include "ops/tensor.h"

namespace tower::ops {

using attrs::FusedActivation;
using attrs::ReduceAxis;

// a[m, k] · b[k, n] -> [m, n]; with transpose_a, a is [k, m]; with transpose_b, b is [n, k].
// a and b are both float32 (Eigen), both bfloat16 (oneDNN's AVX512-BF16 kernels) or both
// float16 (emulated in float32), accumulated in float32; the result has their dtype, or
// `out` (float32 from 16-bit inputs: the gradient of a float32 variable).
StatusOr<Tensor> MatMul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                        DType out);
StatusOr<Tensor> MatMul(const Tensor& a, const Tensor& b, bool transpose_a = false,
                        bool transpose_b = false);
// x · op(weight) as MatMul(x, weight, false, transpose_weight) computes it, bit for bit, where
// the caller promises that `weight` holds the same values in every call with this
// `weight_version` (non-zero), on any thread. A CPU kernel then packs a float32 weight once
// for all of them, the threads that multiply at once packing it together: the replicas that
// share a weight in a step (ops/cpu/shared_packing.h). 0: MatMul.
StatusOr<Tensor> MatMulByWeight(const Tensor& x, const Tensor& weight, bool transpose_weight,
                                uint64_t weight_version);
// f(x · op(weight) + bias), float32 only: x [m, k], weight [k, n] ([n, k] with
// transpose_weight), bias [n] or Tensor() for none, f the identity or Relu. The bits of
// MatMulByWeight (with the same weight_version promise), then BiasAdd, then Relu, in one op
// and, on the CPU, one pass over the output. What a float32 Dense layer runs
// (model/dense.cc).
StatusOr<Tensor> FusedMatMul(const Tensor& x, const Tensor& weight, const Tensor& bias,
                             FusedActivation activation, bool transpose_weight = false,
                             uint64_t weight_version = 0);
// sum += op(a) · op(b), in place, on sum's device: float32 a, b and sum [m, n]. The product
// is added as MatMul computes it into zeros, without zeroing first: one rounding per depth
// block (one in all, for a depth within Eigen's block on the CPU) instead of MatMul, then
// Add. What a replica adds into its group's running gradient
// (strategy/reducers/gradient_folding.h).
Status MatMulAddInto(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                     Tensor& sum);
// x[..., c] + bias[c], the bias added to every row. x may be bfloat16 or float16 (mixed
// precision; CPU kernel only) with a float32 or like-typed bias: the sum is taken in float32
// and rounded once to x's dtype, the output's.
StatusOr<Tensor> BiasAdd(const Tensor& x, const Tensor& bias);
// Elementwise, same shapes.
StatusOr<Tensor> Add(const Tensor& a, const Tensor& b);
StatusOr<Tensor> Sub(const Tensor& a, const Tensor& b);
StatusOr<Tensor> Mul(const Tensor& a, const Tensor& b);
// alpha · x.
StatusOr<Tensor> Scale(const Tensor& x, float alpha);
// Each element into [min, max] (tf.clip_by_value); a NaN stays NaN, so that clipping
// never hides a diverged value. min ≤ max, neither NaN.
StatusOr<Tensor> ClipByValue(const Tensor& x, float min, float max);
// The same on `n` host floats (`x` and `y` may be the same), with no dispatch: the op's CPU
// arithmetic, for updates on slices of host memory.
void ClipByValueOnHost(const attrs::ClipByValue& clip, const float* x, float* y, int64_t n);
// alpha · x + y.
StatusOr<Tensor> Axpy(float alpha, const Tensor& x, const Tensor& y);
// The sum of one or more tensors of one shape.
StatusOr<Tensor> AddN(const std::vector<Tensor>& inputs);
// Over every element (-> a scalar), or along the batch ([n, ...] -> [...]). The mean of
// nothing is NaN, the sum of nothing 0. Accumulated in double, in row order for bfloat16
// and float16 inputs (mixed precision; CPU kernel only), whose sums come out float32.
StatusOr<Tensor> ReduceSum(const Tensor& x, ReduceAxis axis = ReduceAxis::kAll);
StatusOr<Tensor> ReduceMean(const Tensor& x, ReduceAxis axis = ReduceAxis::kAll);

}  // namespace tower::ops

#endif  // TOWER_OPS_MATH_OPS_H_
