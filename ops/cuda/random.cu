// RandomUniform / RandomNormal: element i is philox::Uniform / philox::Normal(seed, i) from
// util/philox.h, the very functions the CPU kernels call. They use only exactly rounded
// operations (explicit fma, no library log/cos), so the values are bitwise the CPU's.
#include "device/cuda/kernel_launch.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/launchers.h"
#include "util/philox.h"

namespace tower::gpu {
namespace {

__global__ void RandomUniformKernel(uint64_t seed, float lo, float hi, float* out, int64_t n) {
  for (int64_t i = GridThread(); i < n; i += GridThreads()) {
    out[i] = philox::Uniform(seed, static_cast<uint64_t>(i), lo, hi);
  }
}

__global__ void RandomNormalKernel(uint64_t seed, float mean, float stddev, float* out, int64_t n) {
  for (int64_t i = GridThread(); i < n; i += GridThreads()) {
    out[i] = philox::Normal(seed, static_cast<uint64_t>(i), mean, stddev);
  }
}

}  // namespace

cudaError_t LaunchRandomUniform(uint64_t seed, float lo, float hi, float* out, int64_t n,
                                cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return TOWER_LAUNCH_KERNEL(RandomUniformKernel, BlocksFor(n), kThreads, 0, stream, seed, lo, hi,
                             out, n);
}

cudaError_t LaunchRandomNormal(uint64_t seed, float mean, float stddev, float* out, int64_t n,
                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return TOWER_LAUNCH_KERNEL(RandomNormalKernel, BlocksFor(n), kThreads, 0, stream, seed, mean,
                             stddev, out, n);
}

}  // namespace tower::gpu
