// Sums: ReduceSum / ReduceMean over every element or along the batch, and the sums inside
// the losses. Accumulated in double like the CPU kernels, in two passes with a fixed order
// (a block's threads in a tree, then the blocks' partial sums in index order): no atomics,
// and the grid depends only on the shape, so results are bitwise reproducible.
#include "device/cuda/kernel_launch.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/launchers.h"

namespace tower::gpu {
namespace {

// ---- every element -> one value --------------------------------------------------------

// Elements per block below which more blocks do not pay (each thread adds >= 16 values), and
// the most blocks (partial sums) a sum uses.
constexpr int64_t kSumPerBlock = 16 * kThreads;
constexpr int64_t kMaxSumBlocks = 1024;

int64_t SumAllBlocks(int64_t n) {
  if (n == 0) return 0;
  const int64_t blocks = (n + kSumPerBlock - 1) / kSumPerBlock;
  return blocks < kMaxSumBlocks ? blocks : kMaxSumBlocks;
}

struct FloatValues {
  const float* x;
  __device__ double operator()(int64_t i) const { return x[i]; }
};

struct SquaredErrors {  // the square rounded to float first, as the CPU computes it
  const float* pred;
  const float* target;
  __device__ double operator()(int64_t i) const {
    const float d = pred[i] - target[i];
    return d * d;
  }
};

struct DoubleValues {
  const double* x;
  __device__ double operator()(int64_t i) const { return x[i]; }
};

// partials[block] = Σ load(i) over this block's share of [0, n).
template <typename Load>
__global__ void PartialSumsKernel(Load load, int64_t n, double* partials) {
  double sum = 0;
  for (int64_t i = GridThread(); i < n; i += GridThreads()) sum += load(i);
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// *out = (Σ partials[count]) · multiplier / divisor, rounded once to float. One block.
__global__ void FinishSumKernel(const double* partials, int64_t count, double multiplier,
                                double divisor, float* out) {
  double sum = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = BlockSum(sum);
  if (threadIdx.x == 0) *out = static_cast<float>(sum * multiplier / divisor);
}

template <typename Load>
cudaError_t SumAll(Load load, int64_t n, double multiplier, double divisor, double* workspace,
                   float* out, cudaStream_t stream) {
  const int64_t blocks = SumAllBlocks(n);
  if (blocks > 0) {
    const cudaError_t error =
        TOWER_LAUNCH_KERNEL(PartialSumsKernel<Load>, static_cast<unsigned>(blocks), kThreads, 0,
                            stream, load, n, workspace);
    if (error != cudaSuccess) return error;
  }
  return TOWER_LAUNCH_KERNEL(FinishSumKernel, 1, kThreads, 0, stream, workspace, blocks, multiplier,
                             divisor, out);
}

// ---- x[rows, cols] -> [cols] -------------------------------------------------------------
// A block is a tile of 32 columns × 8 threads down the rows (coalesced: a warp reads 32
// consecutive floats of one row). The rows are dealt to `chunks` blocks per tile column, so
// that a long batch of few columns still fills the GPU; each chunk's column sums go to the
// workspace, and a second kernel adds the chunks in order.

constexpr int kTileCols = 32;
constexpr int kTileRows = 8;
constexpr int64_t kRowsPerChunk = 64;  // at least this many rows for each chunk
constexpr int64_t kMaxChunks = 256;
constexpr int64_t kMaxWorkspaceDoubles = int64_t{1} << 22;  // 32 MiB of partial sums at most

int64_t SumRowsChunks(int64_t rows, int64_t cols) {
  int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  if (chunks > kMaxChunks) chunks = kMaxChunks;
  const int64_t memory_cap = cols > 0 ? kMaxWorkspaceDoubles / cols : kMaxChunks;
  if (chunks > memory_cap) chunks = memory_cap;
  return chunks < 1 ? 1 : chunks;
}

// With one chunk the tile writes out[col] = sum / divisor; otherwise
// partials[chunk, col] = sum.
__global__ void ColumnSumsKernel(const float* x, int64_t rows, int64_t cols, double divisor,
                                 double* partials, float* out) {
  __shared__ double tile[kTileRows][kTileCols];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTileCols + threadIdx.x;
  double sum = 0;
  if (col < cols) {
    const int64_t stride = static_cast<int64_t>(gridDim.y) * kTileRows;
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * kTileRows + threadIdx.y; r < rows;
         r += stride) {
      sum += x[r * cols + col];
    }
  }
  tile[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols) return;
  double total = 0;
  for (int y = 0; y < kTileRows; ++y) total += tile[y][threadIdx.x];
  if (gridDim.y == 1) {
    out[col] = static_cast<float>(total / divisor);
  } else {
    partials[static_cast<int64_t>(blockIdx.y) * cols + col] = total;
  }
}

// out[col] = (Σ_chunk partials[chunk, col]) / divisor
__global__ void FinishColumnSumsKernel(const double* partials, int64_t chunks, int64_t cols,
                                       double divisor, float* out) {
  for (int64_t col = GridThread(); col < cols; col += GridThreads()) {
    double total = 0;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) total += partials[chunk * cols + col];
    out[col] = static_cast<float>(total / divisor);
  }
}

}  // namespace

int64_t SumAllWorkspaceDoubles(int64_t n) { return SumAllBlocks(n); }

cudaError_t LaunchSumAll(const float* x, int64_t n, double divisor, double* workspace, float* out,
                         cudaStream_t stream) {
  return SumAll(FloatValues{x}, n, 1.0, divisor, workspace, out, stream);
}

cudaError_t LaunchSquaredErrorSum(const float* pred, const float* target, int64_t n, double scale,
                                  double* workspace, float* out, cudaStream_t stream) {
  return SumAll(SquaredErrors{pred, target}, n, scale, 1.0, workspace, out, stream);
}

cudaError_t LaunchSumDoubles(const double* values, int64_t n, double scale, double* workspace,
                             float* out, cudaStream_t stream) {
  return SumAll(DoubleValues{values}, n, scale, 1.0, workspace, out, stream);
}

int64_t SumRowsWorkspaceDoubles(int64_t rows, int64_t cols) {
  const int64_t chunks = SumRowsChunks(rows, cols);
  return chunks > 1 ? chunks * cols : 0;
}

cudaError_t LaunchSumRows(const float* x, int64_t rows, int64_t cols, double divisor,
                          double* workspace, float* out, cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  const int64_t chunks = SumRowsChunks(rows, cols);
  const dim3 grid(static_cast<unsigned>((cols + kTileCols - 1) / kTileCols),
                  static_cast<unsigned>(chunks));
  cudaError_t error = TOWER_LAUNCH_KERNEL(ColumnSumsKernel, grid, dim3(kTileCols, kTileRows), 0,
                                          stream, x, rows, cols, divisor, workspace, out);
  if (error != cudaSuccess || chunks == 1) return error;
  return TOWER_LAUNCH_KERNEL(FinishColumnSumsKernel, BlocksFor(cols), kThreads, 0, stream,
                             workspace, chunks, cols, divisor, out);
}

}  // namespace tower::gpu
