// The same-card reduction kernel's launcher (plain C++ + CUDA runtime types, so that nvcc
// compiles the .cu file without the project's C++ headers).
#ifndef TOWER_STRATEGY_COLLECTIVES_CUDA_SAME_CARD_KERNEL_H_
#define TOWER_STRATEGY_COLLECTIVES_CUDA_SAME_CARD_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tower::cuda {

constexpr int kMaxSameCardReplicas = 32;

// The float buffers of every replica for one tensor (all on one card).
struct ReplicaBuffers {
  float* data[kMaxSameCardReplicas];
};

// For i in [0, count): s = Σ_k buffers.data[k][i] (k = 0..n−1, in order: every run gives the
// same bits) and buffers.data[k][i] = s for every k. Launched on `stream`.
cudaError_t LaunchSameCardSum(const ReplicaBuffers& buffers, int n, int64_t count,
                              cudaStream_t stream);

}  // namespace tower::cuda

#endif  // TOWER_STRATEGY_COLLECTIVES_CUDA_SAME_CARD_KERNEL_H_
