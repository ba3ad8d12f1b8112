#include "strategy/collectives/cuda/same_card_kernel.h"

#include "device/cuda/kernel_launch.h"

namespace tower::cuda {
namespace {

// Grid-stride over elements; each thread sums one element across the replicas and writes
// it back to all of them. Memory-bound: 2n accesses per element.
__global__ void SameCardSumKernel(ReplicaBuffers buffers, int n, int64_t count) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    float sum = buffers.data[0][i];
    for (int k = 1; k < n; ++k) sum += buffers.data[k][i];
    for (int k = 0; k < n; ++k) buffers.data[k][i] = sum;
  }
}

}  // namespace

cudaError_t LaunchSameCardSum(const ReplicaBuffers& buffers, int n, int64_t count,
                              cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(blocks < 4096 ? blocks : 4096);
  return TOWER_LAUNCH_KERNEL(SameCardSumKernel, grid, kThreads, 0, stream, buffers, n, count);
}

}  // namespace tower::cuda
