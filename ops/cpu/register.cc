#include "ops/cpu/cpu_kernels.h"
#include "ops/kernel_registry.h"
#include "ops/op_names.h"

namespace tower {

namespace cpu {

Span<const NamedKernel> AllKernels() {
  using namespace op_names;  // NOLINT: the table reads better without prefixes
  static const NamedKernel kKernels[] = {
      {kMatMul, cpu::MatMul},
      {kMatMulAdd, cpu::MatMulAdd},
      {kFusedMatMul, cpu::FusedMatMul},
      {kBiasAdd, cpu::BiasAdd},
      {kAdd, cpu::Add},
      {kSub, cpu::Sub},
      {kMul, cpu::Mul},
      {kScale, cpu::Scale},
      {kClipByValue, cpu::ClipByValue},
      {kAxpy, cpu::Axpy},
      {kAddN, cpu::AddN},
      {kReduceSum, cpu::ReduceSum},
      {kReduceMean, cpu::ReduceMean},
      {kRelu, cpu::Relu},
      {kReluGrad, cpu::ReluGrad},
      {kSigmoid, cpu::Sigmoid},
      {kSigmoidGrad, cpu::SigmoidGrad},
      {kTanh, cpu::Tanh},
      {kTanhGrad, cpu::TanhGrad},
      {kSoftmax, cpu::Softmax},
      {kSoftmaxGrad, cpu::SoftmaxGrad},
      {kMeanSquaredError, cpu::MeanSquaredError},
      {kMeanSquaredErrorGrad, cpu::MeanSquaredErrorGrad},
      {kSparseSoftmaxCrossEntropy, cpu::SparseSoftmaxCrossEntropy},
      {kSparseSoftmaxCrossEntropyGrad, cpu::SparseSoftmaxCrossEntropyGrad},
      {kFill, cpu::Fill},
      {kConcat, cpu::Concat},
      {kCast, cpu::Cast},
      {kRandomUniform, cpu::RandomUniform},
      {kRandomNormal, cpu::RandomNormal},
      {kApplySgd, cpu::ApplySgd},
      {kApplyAdam, cpu::ApplyAdam},
  };
  return Span<const NamedKernel>(kKernels, sizeof(kKernels) / sizeof(kKernels[0]));
}

}  // namespace cpu

void RegisterCpuKernels(KernelRegistry& registry) {
  for (const cpu::NamedKernel& kernel : cpu::AllKernels()) {
    registry.Register(kernel.op, "CPU", kHostPlatform, kernel.fn);
  }
}

}  // namespace tower
