// Device-side helpers shared by the kernels of ops/cuda: launch geometry, grid-stride
// indices, and warp / block sums in a fixed order (so that sums are bitwise reproducible).
// Included only by .cu files.
#ifndef TOWER_OPS_CUDA_COMMON_CUH_
#define TOWER_OPS_CUDA_COMMON_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace tower::gpu {

inline constexpr int kThreads = 256;  // threads per block of every 1-D launch
inline constexpr int kWarp = 32;
inline constexpr int kWarpsPerBlock = kThreads / kWarp;
inline constexpr unsigned kFullMask = 0xffffffffu;
// Grid-stride loops cover whatever a capped grid does not; 65536 blocks of 256 threads fill
// any current GPU many times over.
inline constexpr int64_t kMaxBlocks = 65536;

// Blocks for `work` items handled `per_block` at a time (at least 1; callers skip n == 0).
inline unsigned BlocksFor(int64_t work, int64_t per_block = kThreads) {
  const int64_t blocks = (work + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// The first index of this thread in a grid-stride loop, and the loop's stride.
__device__ inline int64_t GridThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GridThreads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }
// The same for one warp per item (blockDim.x == kThreads).
__device__ inline int64_t GridWarp() {
  return static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
}
__device__ inline int64_t GridWarps() { return static_cast<int64_t>(gridDim.x) * kWarpsPerBlock; }

// Sum over the 32 lanes of a warp, broadcast from lane 0 so that every lane holds the same
// bits (a butterfly leaves each lane with its own rounding order).
__device__ inline double WarpSum(double v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return __shfl_sync(kFullMask, v, 0);
}

// Maximum over the lanes of a warp (exact, so the same in every lane).
__device__ inline float WarpMax(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  return v;
}

// Sum over the kThreads threads of a block, valid in thread 0. Call at most once per kernel,
// from every thread of the block.
__device__ inline double BlockSum(double v) {
  __shared__ double warp_sums[kWarpsPerBlock];
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  v = WarpSum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarpsPerBlock ? warp_sums[lane] : 0.0;
    v = WarpSum(v);
  }
  return v;
}

}  // namespace tower::gpu

#endif  // TOWER_OPS_CUDA_COMMON_CUH_
