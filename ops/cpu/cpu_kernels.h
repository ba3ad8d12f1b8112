// The CPU kernels (Eigen), one function per op; ops/cpu/register.cc registers them.
// Inputs and outputs are as the op entry points in ops/*_ops.h document.
#ifndef TOWER_OPS_CPU_CPU_KERNELS_H_
#define TOWER_OPS_CPU_CPU_KERNELS_H_

#include "ops/kernel.h"
#include "ops/op_attrs.h"
#include "util/span.h"

namespace tower::cpu {

struct NamedKernel {
  const char* op;
  KernelFn fn;
};
// Every CPU kernel with its op name.
Span<const NamedKernel> AllKernels();

// math
Status MatMul(const KernelContext& ctx);
Status MatMulAdd(const KernelContext& ctx);  // in place: inputs a, b, the sum
Status FusedMatMul(const KernelContext& ctx);
Status BiasAdd(const KernelContext& ctx);
Status Add(const KernelContext& ctx);
Status Sub(const KernelContext& ctx);
Status Mul(const KernelContext& ctx);
Status Scale(const KernelContext& ctx);
Status ClipByValue(const KernelContext& ctx);
// ClipByValue's arithmetic on host arrays (x and y may alias).
void ClipValues(const attrs::ClipByValue& clip, const float* x, float* y, int64_t n);
Status Axpy(const KernelContext& ctx);
Status AddN(const KernelContext& ctx);
Status ReduceSum(const KernelContext& ctx);
Status ReduceMean(const KernelContext& ctx);
// nn
Status Relu(const KernelContext& ctx);
Status ReluGrad(const KernelContext& ctx);
Status Sigmoid(const KernelContext& ctx);
Status SigmoidGrad(const KernelContext& ctx);
Status Tanh(const KernelContext& ctx);
Status TanhGrad(const KernelContext& ctx);
Status Softmax(const KernelContext& ctx);
Status SoftmaxGrad(const KernelContext& ctx);
Status MeanSquaredError(const KernelContext& ctx);
Status MeanSquaredErrorGrad(const KernelContext& ctx);
Status SparseSoftmaxCrossEntropy(const KernelContext& ctx);
Status SparseSoftmaxCrossEntropyGrad(const KernelContext& ctx);
// array
Status Fill(const KernelContext& ctx);
Status Concat(const KernelContext& ctx);
Status Cast(const KernelContext& ctx);
// Cast's conversions between float and a 16-bit type (`dtype`: kBFloat16 or kFloat16, whose
// bit patterns the uint16_t side holds) on n elements of host arrays: vectorised loops, bit
// for bit ops/dtype.h's scalar helpers (round to nearest even, a NaN stays a NaN). Widening
// is exact. The 16-bit kernels compute in float through these (ops/cpu/eigen.h).
void WidenToFloat(DType dtype, const uint16_t* in, float* out, int64_t n);
void NarrowFromFloat(DType dtype, const float* in, uint16_t* out, int64_t n);
Status RandomUniform(const KernelContext& ctx);
Status RandomNormal(const KernelContext& ctx);
// training
Status ApplySgd(const KernelContext& ctx);
Status ApplyAdam(const KernelContext& ctx);
// The arithmetic of those two on n elements of host arrays (velocity: nullptr without
// momentum); any split into ranges gives the bits of one call (training_kernels.cc).
// SgdUpdate split over the intra-op threads of the call (the same bits).
void SgdUpdateSplit(const attrs::Sgd& sgd, float* var, float* velocity, const float* grad,
                    int64_t n);
void SgdUpdate(const attrs::Sgd& sgd, float* var, float* velocity, const float* grad,
               int64_t n);
// AdamUpdate split over the intra-op threads of the call (the same bits).
void AdamUpdateSplit(const attrs::Adam& adam, float* var, float* m, float* v, const float* grad,
                     int64_t n);
void AdamUpdate(const attrs::Adam& adam, float* var, float* m, float* v, const float* grad,
                int64_t n);

}  // namespace tower::cpu

#endif  // TOWER_OPS_CPU_CPU_KERNELS_H_
