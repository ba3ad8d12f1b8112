// Optimizer updates, in place, one thread per element. Every product that feeds a sum is
// rounded on its own (__fmul_rn: nvcc would otherwise fuse it into an fma), because the CPU
// kernels (Eigen) round it so: SGD updates are bitwise the CPU's, so CPU and GPU replicas
// stay identical. Adam's too, but for the square root: sqrtf here is correctly rounded, while
// Eigen's vectorised sqrt (EIGEN_FAST_MATH, AVX) is rsqrt plus a Newton step, off by an ulp
// at times.
#include "device/cuda/kernel_launch.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/launchers.h"

namespace tower::gpu {
namespace {

__global__ void SgdKernel(float* var, const float* grad, float learning_rate, int64_t n) {
  for (int64_t i = GridThread(); i < n; i += GridThreads()) {
    var[i] -= __fmul_rn(learning_rate, grad[i]);
  }
}

__global__ void SgdMomentumKernel(float* var, float* velocity, const float* grad,
                                  float learning_rate, float momentum, bool nesterov, int64_t n) {
  for (int64_t i = GridThread(); i < n; i += GridThreads()) {
    const float step = __fmul_rn(learning_rate, grad[i]);
    const float v = __fmul_rn(momentum, velocity[i]) - step;
    velocity[i] = v;
    var[i] += nesterov ? __fmul_rn(momentum, v) - step : v;
  }
}

__global__ void AdamKernel(float* var, float* m, float* v, const float* grad, float alpha,
                           float one_minus_beta1, float one_minus_beta2, float epsilon,
                           float decay, int64_t n) {
  for (int64_t i = GridThread(); i < n; i += GridThreads()) {
    const float g = grad[i];
    const float mi = m[i] + __fmul_rn(one_minus_beta1, g - m[i]);
    const float vi = v[i] + __fmul_rn(one_minus_beta2, __fmul_rn(g, g) - v[i]);
    m[i] = mi;
    v[i] = vi;
    // AdamW's decay first (skipped at 0: an infinite weight keeps plain Adam's result).
    float w = var[i];
    if (decay != 0) w -= __fmul_rn(decay, w);
    // sqrtf and / are correctly rounded (nvcc's defaults -prec-sqrt, -prec-div).
    var[i] = w - __fmul_rn(alpha, mi) / (sqrtf(vi) + epsilon);
  }
}

}  // namespace

cudaError_t LaunchApplySgd(float* var, const float* grad, float learning_rate, int64_t n,
                           cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return TOWER_LAUNCH_KERNEL(SgdKernel, BlocksFor(n), kThreads, 0, stream, var, grad, learning_rate,
                             n);
}

cudaError_t LaunchApplySgdMomentum(float* var, float* velocity, const float* grad,
                                   float learning_rate, float momentum, bool nesterov, int64_t n,
                                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return TOWER_LAUNCH_KERNEL(SgdMomentumKernel, BlocksFor(n), kThreads, 0, stream, var, velocity,
                             grad, learning_rate, momentum, nesterov, n);
}

cudaError_t LaunchApplyAdam(float* var, float* m, float* v, const float* grad, float alpha,
                            float beta1, float beta2, float epsilon, float decay, int64_t n,
                            cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  // 1 − β in float, as the CPU kernel computes it.
  return TOWER_LAUNCH_KERNEL(AdamKernel, BlocksFor(n), kThreads, 0, stream, var, m, v, grad, alpha,
                             1.0f - beta1, 1.0f - beta2, epsilon, decay, n);
}

}  // namespace tower::gpu
