// Softmax, its gradient and the sparse softmax cross-entropy (loss and gradient): one warp
// per row of [n, c], the lanes striding over the columns. Numerically stable as on the CPU:
// the row's maximum is subtracted before exp, and Σ exp is accumulated in double.
//
// A warp per row suits the class counts of classifiers (tens to thousands); rows of very
// many columns would go faster with a block per row.
#include <cmath>

#include "device/cuda/kernel_launch.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/launchers.h"

namespace tower::gpu {
namespace {

struct RowStats {
  float max;   // the row's largest logit
  double sum;  // Σ_j exp(logit_j − max)
};

// Every lane of the warp gets the same stats.
__device__ RowStats SoftmaxStats(const float* row, int64_t c, int lane) {
  float max = -INFINITY;
  for (int64_t j = lane; j < c; j += kWarp) max = fmaxf(max, row[j]);
  max = WarpMax(max);
  double sum = 0;
  for (int64_t j = lane; j < c; j += kWarp) sum += expf(row[j] - max);
  return RowStats{max, WarpSum(sum)};
}

__device__ bool ValidLabel(int32_t label, int64_t c) { return label >= 0 && label < c; }

__global__ void SoftmaxKernel(const float* logits, float* y, int64_t n, int64_t c) {
  const int lane = threadIdx.x % kWarp;
  for (int64_t i = GridWarp(); i < n; i += GridWarps()) {
    const float* row = logits + i * c;
    const RowStats stats = SoftmaxStats(row, c, lane);
    const float inverse = static_cast<float>(1.0 / stats.sum);
    for (int64_t j = lane; j < c; j += kWarp) {
      y[i * c + j] = __fmul_rn(expf(row[j] - stats.max), inverse);
    }
  }
}

__global__ void SoftmaxGradKernel(const float* dy, const float* y, float* dx, int64_t n,
                                  int64_t c) {
  const int lane = threadIdx.x % kWarp;
  for (int64_t i = GridWarp(); i < n; i += GridWarps()) {
    const int64_t offset = i * c;
    double dot = 0;
    for (int64_t j = lane; j < c; j += kWarp) {
      dot += static_cast<double>(dy[offset + j]) * y[offset + j];  // exact product
    }
    const float row_dot = static_cast<float>(WarpSum(dot));
    for (int64_t j = lane; j < c; j += kWarp) {
      dx[offset + j] = y[offset + j] * (dy[offset + j] - row_dot);
    }
  }
}

__global__ void CrossEntropyRowLossesKernel(const float* logits, const int32_t* labels, int64_t n,
                                            int64_t c, double* row_loss, RowIndex* first_bad_row) {
  const int lane = threadIdx.x % kWarp;
  for (int64_t i = GridWarp(); i < n; i += GridWarps()) {
    const int32_t label = labels[i];  // the same for every lane: the branch is warp-uniform
    if (!ValidLabel(label, c)) {
      if (lane == 0) {
        atomicMin(first_bad_row, static_cast<RowIndex>(i));
        row_loss[i] = 0;
      }
      continue;
    }
    const float* row = logits + i * c;
    const RowStats stats = SoftmaxStats(row, c, lane);
    if (lane == 0) {
      const float log_sum = stats.max + static_cast<float>(log(stats.sum));
      row_loss[i] = static_cast<double>(log_sum) - row[label];
    }
  }
}

__global__ void CrossEntropyGradKernel(const float* logits, const int32_t* labels, int64_t n,
                                       int64_t c, float scale, float* grad,
                                       RowIndex* first_bad_row) {
  const int lane = threadIdx.x % kWarp;
  for (int64_t i = GridWarp(); i < n; i += GridWarps()) {
    const int32_t label = labels[i];
    if (!ValidLabel(label, c)) {
      if (lane == 0) atomicMin(first_bad_row, static_cast<RowIndex>(i));
      continue;
    }
    const float* row = logits + i * c;
    const RowStats stats = SoftmaxStats(row, c, lane);
    const float inverse = static_cast<float>(1.0 / stats.sum);
    for (int64_t j = lane; j < c; j += kWarp) {
      // Rounded like the CPU's: the probability, then − 1, then · scale.
      float p = __fmul_rn(expf(row[j] - stats.max), inverse);
      if (j == label) p -= 1.0f;
      grad[i * c + j] = p * scale;
    }
  }
}

unsigned WarpBlocksFor(int64_t rows) { return BlocksFor(rows, kWarpsPerBlock); }

}  // namespace

cudaError_t LaunchSoftmax(const float* logits, float* y, int64_t n, int64_t c,
                          cudaStream_t stream) {
  if (n == 0 || c == 0) return cudaSuccess;
  return TOWER_LAUNCH_KERNEL(SoftmaxKernel, WarpBlocksFor(n), kThreads, 0, stream, logits, y, n, c);
}

cudaError_t LaunchSoftmaxGrad(const float* dy, const float* y, float* dx, int64_t n, int64_t c,
                              cudaStream_t stream) {
  if (n == 0 || c == 0) return cudaSuccess;
  return TOWER_LAUNCH_KERNEL(SoftmaxGradKernel, WarpBlocksFor(n), kThreads, 0, stream, dy, y, dx, n,
                             c);
}

cudaError_t LaunchCrossEntropyRowLosses(const float* logits, const int32_t* labels, int64_t n,
                                        int64_t c, double* row_loss, RowIndex* first_bad_row,
                                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return TOWER_LAUNCH_KERNEL(CrossEntropyRowLossesKernel, WarpBlocksFor(n), kThreads, 0, stream,
                             logits, labels, n, c, row_loss, first_bad_row);
}

cudaError_t LaunchCrossEntropyGrad(const float* logits, const int32_t* labels, int64_t n, int64_t c,
                                   float scale, float* grad, RowIndex* first_bad_row,
                                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return TOWER_LAUNCH_KERNEL(CrossEntropyGradKernel, WarpBlocksFor(n), kThreads, 0, stream, logits,
                             labels, n, c, scale, grad, first_bad_row);
}

}  // namespace tower::gpu
