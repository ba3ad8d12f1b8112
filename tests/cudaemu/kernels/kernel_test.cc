// Kernels on the host (cudaemu/runtime/include/cudaemu/device_functions.h, kernel_launch.h):
// built-in variables, __shared__, __syncthreads, warp shuffles, atomics, the launch's
// checks, argument copies and stream order. Every answer is closed-form. Faults poison the
// device's context, so they are tested in sticky_test.cc.
#include <cuda_runtime.h>
#include <cudaemu/testing.h>
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#if defined(__OPTIMIZE__) && !defined(SANITIZED)
constexpr bool kTimed = true;  // an optimised build without sanitizers: timings are checked
#else
constexpr bool kTimed = false;
#endif

constexpr unsigned kFull = 0xffffffffu;

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// Device memory of n T's, copied to and from host vectors.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n, int fill_byte = 0) : n_(n) {
    void* ptr = nullptr;
    EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(T)), cudaSuccess);
    ptr_ = static_cast<T*>(ptr);
    EXPECT_EQ(cudaMemset(ptr_, fill_byte, n * sizeof(T)), cudaSuccess);
  }
  explicit DeviceArray(const std::vector<T>& values) : DeviceArray(values.size()) {
    EXPECT_EQ(cudaMemcpy(ptr_, values.data(), n_ * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceArray() { EXPECT_EQ(cudaFree(ptr_), cudaSuccess); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return ptr_; }
  std::vector<T> ToHost() const {
    std::vector<T> values(n_);
    EXPECT_EQ(cudaMemcpy(values.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return values;
  }

 private:
  size_t n_;
  T* ptr_ = nullptr;
};

class Stream {
 public:
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() { EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// ---- grid-stride elementwise ----------------------------------------------------------------

__global__ void AxpbKernel(const float* x, float* y, float a, float b, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    y[i] = __fadd_rn(__fmul_rn(a, x[i]), b);
  }
}

TEST(KernelTest, GridStrideElementwise) {
  const int64_t n = int64_t{1} << 22;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000);
  DeviceArray<float> dx(x);
  DeviceArray<float> dy(n);
  Stream stream;
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  const int64_t launches = cudaemu::testing::KernelLaunches();
  // Best of three: the first run also maps the worker's fiber stacks.
  double best_ms = 1e9;
  for (int run = 0; run < 3; ++run) {
    const auto start = std::chrono::steady_clock::now();
    cudaemu::LaunchKernel(AxpbKernel, "AxpbKernel", 4096, 256, 0, stream.get(), dx.get(),
                          dy.get(), 2.0f, 1.0f, n);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaStreamSynchronize(stream.get()));
    best_ms = std::min(best_ms, MillisecondsSince(start));
  }
  std::printf("grid-stride 2^22 floats, 4096 blocks x 256 threads: %.1f ms\n", best_ms);
  EXPECT_EQ(cudaemu::testing::KernelLaunches(), launches + 3);
  const std::vector<float> y = dy.ToHost();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y[i], 2.0f * static_cast<float>(i % 1000) + 1.0f) << i;
  }
  if (kTimed) EXPECT_LT(best_ms, 100.0);

  // A tail that the grid does not divide, with an odd block size.
  const int64_t m = 1000003;
  DeviceArray<float> dz(m);
  cudaemu::LaunchKernel(AxpbKernel, "AxpbKernel", 37, 96, 0, stream.get(), dx.get(), dz.get(),
                        -1.0f, 0.5f, m);
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  const std::vector<float> z = dz.ToHost();
  for (int64_t i = 0; i < m; ++i) {
    ASSERT_EQ(z[i], 0.5f - static_cast<float>(i % 1000)) << i;
  }
}

// Kernel templates and functor arguments, launched as BinaryKernel<Op>.
struct AddOp {
  float bias;
  __device__ float operator()(float a, float b) const { return a + b + bias; }
};
template <typename Op>
__global__ void BinaryKernel(const float* a, const float* b, float* out, int64_t n, Op op) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = op(a[i], b[i]);
  }
}

TEST(KernelTest, TemplateKernelWithFunctor) {
  const int n = 5000;
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = static_cast<float>(2 * i);
  }
  DeviceArray<float> da(a), db(b), dout(n);
  cudaemu::LaunchKernel(BinaryKernel<AddOp>, "BinaryKernel<AddOp>", 7, 128, 0, nullptr, da.get(),
                        db.get(), dout.get(), n, AddOp{0.5f});
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> out = dout.ToHost();
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], static_cast<float>(3 * i) + 0.5f) << i;
}

// ---- 2-D grids and blocks -------------------------------------------------------------------

__global__ void IndexKernel(unsigned* seen, unsigned* bad, dim3 grid, dim3 block, bool sync) {
  const unsigned block_id = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
  const unsigned thread_id = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  if (sync) __syncthreads();  // uniform: the block runs as fibers
  // The coordinates read after a switch are still this thread's.
  const unsigned again = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  if (again != thread_id) atomicAdd(bad, 1u);
  atomicAdd(&seen[block_id * per_block + thread_id], 1u);
  if (gridDim.x != grid.x || gridDim.y != grid.y || gridDim.z != grid.z ||
      blockDim.x != block.x || blockDim.y != block.y || blockDim.z != block.z ||
      threadIdx.x >= blockDim.x || threadIdx.y >= blockDim.y || threadIdx.z >= blockDim.z ||
      blockIdx.x >= gridDim.x || blockIdx.y >= gridDim.y || blockIdx.z >= gridDim.z) {
    atomicAdd(bad, 1u);
  }
}

TEST(KernelTest, EveryBlockAndThreadIndexOnce) {
  struct Case {
    dim3 grid, block;
  };
  const Case cases[] = {{dim3(5, 3, 2), dim3(8, 4, 2)},
                        {dim3(3, 4), dim3(32, 8)},
                        {dim3(2, 1, 3), dim3(7, 3, 5)},
                        {dim3(1), dim3(1024)},
                        {dim3(2), dim3(1, 1, 64)}};
  Stream stream;
  for (const Case& c : cases) {
    for (const bool sync : {false, true}) {
      const size_t total = size_t{c.grid.x} * c.grid.y * c.grid.z * c.block.x * c.block.y *
                           c.block.z;
      DeviceArray<unsigned> seen(total);
      DeviceArray<unsigned> bad(1);
      cudaemu::LaunchKernel(IndexKernel, "IndexKernel", c.grid, c.block, 0, stream.get(),
                            seen.get(), bad.get(), c.grid, c.block, sync);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaStreamSynchronize(stream.get()));
      const std::vector<unsigned> counts = seen.ToHost();
      for (size_t i = 0; i < total; ++i) ASSERT_EQ(counts[i], 1u) << i << " sync=" << sync;
      EXPECT_EQ(bad.ToHost()[0], 0u) << "sync=" << sync;
    }
  }
}

// ---- block reductions ---------------------------------------------------------------------

// The classic tree in shared memory.
__global__ void TreeSumKernel(const int* x, long long* partial, int n) {
  __shared__ long long buffer[256];
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  buffer[threadIdx.x] = i < n ? x[i] : 0;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buffer[threadIdx.x] += buffer[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = buffer[0];
}

TEST(KernelTest, SharedMemoryTreeReduction) {
  const int blocks = 100;
  const int n = blocks * 256 - 17;
  std::vector<int> x(n);
  for (int i = 0; i < n; ++i) x[i] = i;
  DeviceArray<int> dx(x);
  DeviceArray<long long> partial(blocks);
  Stream stream;
  cudaemu::LaunchKernel(TreeSumKernel, "TreeSumKernel", blocks, 256, 0, stream.get(), dx.get(),
                        partial.get(), n);
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  const std::vector<long long> sums = partial.ToHost();
  for (int b = 0; b < blocks; ++b) {
    const long long first = 256LL * b;
    const long long last = std::min<long long>(first + 255, n - 1);  // inclusive
    EXPECT_EQ(sums[b], (first + last) * (last - first + 1) / 2) << b;
  }
}

// ops/cuda/common.cuh's BlockSum: warp butterflies, a shared array in a device function,
// one __syncthreads.
constexpr int kWarp = 32;
__device__ inline double WarpSum(double v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFull, v, offset);
  return __shfl_sync(kFull, v, 0);
}
__device__ inline double BlockSum(double v) {
  __shared__ double warp_sums[32];
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = WarpSum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? warp_sums[lane] : 0.0;
    v = WarpSum(v);
  }
  return v;
}
__global__ void PartialSumsKernel(const double* x, int64_t n, double* partials) {
  double sum = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    sum += x[i];
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

TEST(KernelTest, BlockSumWithShufflesAndBarrier) {
  const int64_t n = kTimed ? int64_t{1} << 20 : int64_t{1} << 18;
  std::vector<double> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<double>(i);
  DeviceArray<double> dx(x);
  Stream stream;
  for (const unsigned threads : {256u, 1024u, 64u}) {
    // Under the sanitizers (TSan: ~20x slower) fewer blocks keep the test short.
    const unsigned blocks = kTimed ? 1024 : 128;
    DeviceArray<double> partials(blocks);
    CUDA_OK(cudaStreamSynchronize(stream.get()));
    const auto start = std::chrono::steady_clock::now();
    cudaemu::LaunchKernel(PartialSumsKernel, "PartialSumsKernel", blocks, threads, 0,
                          stream.get(), dx.get(), n, partials.get());
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaStreamSynchronize(stream.get()));
    const double ms = MillisecondsSince(start);
    std::printf("block sums, %u blocks x %u threads: %.1f ms\n", blocks, threads, ms);
    const std::vector<double> sums = partials.ToHost();
    // Block b's threads take the indices congruent to b·threads + t modulo blocks·threads.
    const int64_t stride = int64_t{blocks} * threads;
    double total = 0;
    for (unsigned b = 0; b < blocks; ++b) {
      const int64_t first = int64_t{b} * threads;
      const int64_t rounds = n / stride;  // n is a multiple of the stride here
      // Σ_{r, t} (first + t + r·stride)
      const int64_t expected =
          rounds * (threads * first + int64_t{threads} * (threads - 1) / 2) +
          int64_t{threads} * stride * rounds * (rounds - 1) / 2;
      ASSERT_EQ(sums[b], static_cast<double>(expected)) << "block " << b << ", " << threads;
      total += sums[b];
    }
    EXPECT_EQ(total, static_cast<double>(n) * (n - 1) / 2);
    if (kTimed && threads == 256) EXPECT_LT(ms, 1000.0);
  }
}

// __syncthreads_count / _and / _or, and a barrier that threads which returned early do not
// hold up.
__global__ void BarrierReduceKernel(int* out) {
  const int t = static_cast<int>(threadIdx.x);
  const int count = __syncthreads_count(t % 3 == 0);
  const int all = __syncthreads_and(t < 1000);
  const int any = __syncthreads_or(t == 77);
  const int none = __syncthreads_or(0);
  if (t == 0) {
    out[0] = count;
    out[1] = all;
    out[2] = any;
    out[3] = none;
  }
}
__global__ void EarlyReturnKernel(int* out) {
  __shared__ int values[256];
  const int t = static_cast<int>(threadIdx.x);
  if (t < 100) return;  // exited threads are not waited for
  values[t] = t;
  __syncthreads();
  out[t] = values[355 - t];  // written by another thread before the barrier
}

TEST(KernelTest, BarrierPredicatesAndEarlyExit) {
  DeviceArray<int> out(4);
  DeviceArray<int> mirrored(256);
  Stream stream;
  cudaemu::LaunchKernel(BarrierReduceKernel, "BarrierReduceKernel", 1, 256, 0, stream.get(),
                        out.get());
  cudaemu::LaunchKernel(EarlyReturnKernel, "EarlyReturnKernel", 1, 256, 0, stream.get(),
                        mirrored.get());
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  EXPECT_EQ(out.ToHost(), (std::vector<int>{86, 1, 1, 0}));
  const std::vector<int> m = mirrored.ToHost();
  for (int t = 0; t < 256; ++t) EXPECT_EQ(m[t], t < 100 ? 0 : 355 - t) << t;
}

// ---- warp shuffles --------------------------------------------------------------------------

constexpr int kShuffleRows = 13;

__global__ void ShuffleKernel(long long* out, double* doubles, unsigned long long* wide) {
  const int t = static_cast<int>(threadIdx.x);
  const int n = static_cast<int>(blockDim.x);
  long long* row = out;
  row[t] = __shfl_xor_sync(kFull, t * 10, 5);
  row += n;
  row[t] = __shfl_down_sync(kFull, t, 3);
  row += n;
  row[t] = __shfl_up_sync(kFull, t, 2);
  row += n;
  row[t] = __shfl_sync(kFull, t + 1000, 7);
  row += n;
  row[t] = __shfl_xor_sync(kFull, t, 4, 8);
  row += n;
  row[t] = __shfl_xor_sync(kFull, t, 8, 8);
  row += n;
  row[t] = __shfl_sync(kFull, t, 9, 8);
  row += n;
  row[t] = __shfl_down_sync(kFull, t, 3, 8);
  row += n;
  row[t] = __shfl_up_sync(kFull, t, 3, 8);
  row += n;
  row[t] = __ballot_sync(kFull, t % 3 == 0);
  row += n;
  row[t] = __any_sync(kFull, t % 32 == 31) * 10 + __all_sync(kFull, t % 32 < 31);
  row += n;
  // Two halves of each warp shuffle separately, with their own masks.
  const int lane = t % 32;
  if (lane < 16) {
    row[t] = __shfl_sync(0x0000ffffu, t, 15);
  } else {
    row[t] = __shfl_sync(0xffff0000u, t, 16);
  }
  row += n;
  __syncwarp();
  row[t] = static_cast<long long>(__shfl_sync(kFull, static_cast<unsigned>(t) * 3u, lane ^ 31));
  doubles[t] = __shfl_xor_sync(kFull, t + 0.5, 1);
  wide[t] = __shfl_down_sync(kFull, (1ULL << 40) + static_cast<unsigned long long>(t), 16);
}

TEST(KernelTest, WarpShuffles) {
  const int n = 64;  // two warps
  DeviceArray<long long> out(kShuffleRows * n);
  DeviceArray<double> doubles(n);
  DeviceArray<unsigned long long> wide(n);
  Stream stream;
  cudaemu::LaunchKernel(ShuffleKernel, "ShuffleKernel", 1, n, 0, stream.get(), out.get(),
                        doubles.get(), wide.get());
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  const std::vector<long long> r = out.ToHost();
  const std::vector<double> d = doubles.ToHost();
  const std::vector<unsigned long long> w = wide.ToHost();
  for (int t = 0; t < n; ++t) {
    const int lane = t % 32;
    const int base = t - lane;
    unsigned ballot = 0;
    for (int l = 0; l < 32; ++l) ballot |= ((base + l) % 3 == 0 ? 1u : 0u) << l;
    const long long expected[kShuffleRows] = {
        (base + (lane ^ 5)) * 10,
        lane + 3 < 32 ? t + 3 : t,
        lane >= 2 ? t - 2 : t,
        base + 7 + 1000,
        base + (lane ^ 4),
        (lane & 8) != 0 ? t - 8 : t,  // lane ^ 8 in a later segment: the lane's own value
        base + (lane & ~7) + 1,       // source lane 9 modulo the width 8
        (lane & 7) + 3 <= 7 ? t + 3 : t,
        (lane & 7) >= 3 ? t - 3 : t,
        ballot,
        10 + 0,
        lane < 16 ? base + 15 : base + 16,
        3LL * (base + (lane ^ 31)),
    };
    for (int k = 0; k < kShuffleRows; ++k) {
      EXPECT_EQ(r[k * n + t], expected[k]) << "row " << k << ", thread " << t;
    }
    EXPECT_EQ(d[t], base + (lane ^ 1) + 0.5) << t;
    EXPECT_EQ(w[t], (1ULL << 40) + static_cast<unsigned long long>(lane + 16 < 32 ? t + 16 : t))
        << t;
  }
}

// Warp-uniform branches (nn.cu's rows with a bad label): some warps skip the shuffles, the
// others do them; the threads run in the loop before the first shuffle must not matter.
__global__ void UnevenWarpsKernel(const int* skip, double* out) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (skip[warp] != 0) {
    out[threadIdx.x] = -1;
    return;
  }
  out[threadIdx.x] = WarpSum(static_cast<double>(lane));
}

TEST(KernelTest, WarpUniformBranches) {
  const std::vector<int> skip = {1, 1, 0, 1, 0, 0, 1, 0};
  DeviceArray<int> dskip(skip);
  DeviceArray<double> out(256);
  Stream stream;
  cudaemu::LaunchKernel(UnevenWarpsKernel, "UnevenWarpsKernel", 1, 256, 0, stream.get(),
                        dskip.get(), out.get());
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  const std::vector<double> o = out.ToHost();
  for (int t = 0; t < 256; ++t) EXPECT_EQ(o[t], skip[t / 32] ? -1.0 : 496.0) << t;
}

// ---- atomics --------------------------------------------------------------------------------

__global__ void AtomicsKernel(unsigned* count, unsigned long long* lowest, float* float_sum,
                              double* double_sum, int* highest, int* cas_flag, int* cas_winners,
                              int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  atomicAdd(count, 1u);
  if (i % 7 == 3) atomicMin(lowest, static_cast<unsigned long long>(i));
  atomicAdd(float_sum, 1.0f);
  atomicAdd(double_sum, 0.5);
  atomicMax(highest, i);
  if (atomicCAS(cas_flag, 0, i + 1) == 0) atomicAdd(cas_winners, 1);
}

TEST(KernelTest, AtomicsAcrossBlocks) {
  const int n = 100 * 128 - 5;
  DeviceArray<unsigned> count(1);
  DeviceArray<unsigned long long> lowest(std::vector<unsigned long long>{ULLONG_MAX});
  DeviceArray<float> float_sum(1);
  DeviceArray<double> double_sum(1);
  DeviceArray<int> highest(std::vector<int>{-1});
  DeviceArray<int> cas_flag(1), cas_winners(1);
  Stream stream;
  cudaemu::LaunchKernel(AtomicsKernel, "AtomicsKernel", 100, 128, 0, stream.get(), count.get(),
                        lowest.get(), float_sum.get(), double_sum.get(), highest.get(),
                        cas_flag.get(), cas_winners.get(), n);
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  EXPECT_EQ(count.ToHost()[0], static_cast<unsigned>(n));
  EXPECT_EQ(lowest.ToHost()[0], 3u);
  EXPECT_EQ(float_sum.ToHost()[0], static_cast<float>(n));
  EXPECT_EQ(double_sum.ToHost()[0], n * 0.5);
  EXPECT_EQ(highest.ToHost()[0], n - 1);
  EXPECT_EQ(cas_winners.ToHost()[0], 1);
  const int flag = cas_flag.ToHost()[0];
  EXPECT_GE(flag, 1);
  EXPECT_LE(flag, n);
}

__global__ void CountKernel(unsigned long long* counter, int iterations) {
  for (int k = 0; k < iterations; ++k) atomicAdd(counter, 1ULL);
}

// Kernels on two streams run at the same time (two worker threads): the atomics are real.
TEST(KernelTest, AtomicsAcrossConcurrentStreams) {
  DeviceArray<unsigned long long> counter(1);
  Stream a, b;
  const int iterations = 20;
  for (int round = 0; round < 4; ++round) {
    cudaemu::LaunchKernel(CountKernel, "CountKernel", 64, 256, 0, a.get(), counter.get(),
                          iterations);
    cudaemu::LaunchKernel(CountKernel, "CountKernel", 64, 256, 0, b.get(), counter.get(),
                          iterations);
  }
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaStreamSynchronize(a.get()));
  CUDA_OK(cudaStreamSynchronize(b.get()));
  EXPECT_EQ(counter.ToHost()[0], 4ULL * 2 * 64 * 256 * iterations);
}

// ---- stream order and arguments ---------------------------------------------------------------

__global__ void IotaKernel(int* a, int n) {
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n;
       i += static_cast<int>(gridDim.x * blockDim.x)) {
    a[i] = i;
  }
}
__global__ void DoubleKernel(const int* a, int* b, int n) {
  __shared__ int tile[128];
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  tile[threadIdx.x] = i < n ? a[i] : 0;
  __syncthreads();
  if (i < n) b[i] = 2 * tile[threadIdx.x];
}
__global__ void AddOneKernel(int* b, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) b[i] += 1;
}

TEST(KernelTest, StreamOrder) {
  const int n = 100000;
  DeviceArray<int> a(n, 0xff), b(n, 0xff);
  Stream stream;
  for (int round = 0; round < 3; ++round) {
    cudaemu::LaunchKernel(IotaKernel, "IotaKernel", 13, 64, 0, stream.get(), a.get(), n);
    cudaemu::LaunchKernel(DoubleKernel, "DoubleKernel", (n + 127) / 128, 128, 0, stream.get(),
                          a.get(), b.get(), n);
    cudaemu::LaunchKernel(AddOneKernel, "AddOneKernel", (n + 255) / 256, 256, 0, stream.get(),
                          b.get(), n);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaStreamSynchronize(stream.get()));
    const std::vector<int> result = b.ToHost();
    for (int i = 0; i < n; ++i) ASSERT_EQ(result[i], 2 * i + 1) << i;
    CUDA_OK(cudaMemset(b.get(), 0xff, n * sizeof(int)));
  }
}

__global__ void SpinKernel(const int* go) {
  while (__atomic_load_n(go, __ATOMIC_ACQUIRE) == 0) {
  }
}
struct Batch {
  int values[4];
  const int* pointer;
};
__global__ void ArgumentsKernel(Batch batch, float converted, int64_t widened, int* ints,
                                float* floats, long long* wides) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  for (int k = 0; k < 4; ++k) ints[k] = batch.values[k];
  ints[4] = *batch.pointer;
  floats[0] = converted;
  wides[0] = widened;
}
// Each thread has its own copy of the parameters, also across a barrier.
__global__ void OwnParameterKernel(int k, int* out) {
  k += static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = k;
}

TEST(KernelTest, ArgumentsAreCopiedAtLaunch) {
  int go = 0;
  DeviceArray<int> ints(5), per_thread(64);
  DeviceArray<float> floats(1);
  DeviceArray<long long> wides(1);
  DeviceArray<int> pointee(std::vector<int>{42});
  Stream stream;
  // The stream is held until `go`: the launch below is queued, not run.
  cudaemu::LaunchKernel(SpinKernel, "SpinKernel", 1, 1, 0, stream.get(), &go);
  Batch batch{{1, 2, 3, 4}, pointee.get()};
  int to_float = 3;
  int to_int64 = -5;
  cudaemu::LaunchKernel(ArgumentsKernel, "ArgumentsKernel", 2, 32, 0, stream.get(), batch,
                        to_float, to_int64, ints.get(), floats.get(), wides.get());
  int k = 1000;
  cudaemu::LaunchKernel(OwnParameterKernel, "OwnParameterKernel", 1, 64, 0, stream.get(), k,
                        per_thread.get());
  CUDA_OK(cudaGetLastError());
  batch = Batch{{9, 9, 9, 9}, nullptr};
  to_float = 100;
  to_int64 = 100;
  k = 0;
  EXPECT_EQ(cudaStreamQuery(stream.get()), cudaErrorNotReady);
  (void)cudaGetLastError();  // the query's cudaErrorNotReady
  __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  EXPECT_EQ(ints.ToHost(), (std::vector<int>{1, 2, 3, 4, 42}));
  EXPECT_EQ(floats.ToHost()[0], 3.0f);
  EXPECT_EQ(wides.ToHost()[0], -5);
  const std::vector<int> own = per_thread.ToHost();
  for (int t = 0; t < 64; ++t) EXPECT_EQ(own[t], 1000 + t) << t;
}

// ---- launch errors ----------------------------------------------------------------------------

__global__ void MarkKernel(int* mark) {
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0 && blockIdx.x == 0 &&
      blockIdx.y == 0 && blockIdx.z == 0) {
    *mark += 1;
  }
}

TEST(KernelTest, InvalidConfigurations) {
  DeviceArray<int> mark(1);
  Stream stream;
  CUDA_OK(cudaGetLastError());
  struct Case {
    dim3 grid, block;
    size_t shared;
  };
  const Case invalid[] = {
      {dim3(1), dim3(0), 0},
      {dim3(1), dim3(1, 0), 0},
      {dim3(1), dim3(1, 1, 0), 0},
      {dim3(1), dim3(1025), 0},
      {dim3(1), dim3(1, 1025), 0},
      {dim3(1), dim3(1, 1, 65), 0},
      {dim3(1), dim3(32, 32, 2), 0},  // 2048 threads
      {dim3(1), dim3(512, 3), 0},     // 1536 threads
      {dim3(0), dim3(32), 0},
      {dim3(1, 0), dim3(32), 0},
      {dim3(1, 1, 0), dim3(32), 0},
      {dim3(2147483648u), dim3(32), 0},
      {dim3(1, 65536), dim3(32), 0},
      {dim3(1, 1, 65536), dim3(32), 0},
      {dim3(1), dim3(32), 48 * 1024 + 1},
  };
  const int64_t launches = cudaemu::testing::KernelLaunches();
  for (const Case& c : invalid) {
    cudaemu::LaunchKernel(MarkKernel, "MarkKernel", c.grid, c.block, c.shared, stream.get(),
                          mark.get());
    EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration)
        << c.grid.x << "," << c.grid.y << "," << c.grid.z << " / " << c.block.x << ","
        << c.block.y << "," << c.block.z << " / " << c.shared;
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
  EXPECT_EQ(cudaemu::testing::KernelLaunches(),
            launches + static_cast<int64_t>(sizeof(invalid) / sizeof(invalid[0])));
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  EXPECT_EQ(mark.ToHost()[0], 0);  // none ran

  // The limits themselves are valid.
  const Case valid[] = {
      {dim3(1), dim3(1024), 48 * 1024},
      {dim3(1), dim3(1, 1024), 0},
      {dim3(1), dim3(1, 1, 64), 0},
      {dim3(1, 65535), dim3(1), 0},
      {dim3(1, 1, 65535), dim3(1), 0},
  };
  for (const Case& c : valid) {
    cudaemu::LaunchKernel(MarkKernel, "MarkKernel", c.grid, c.block, c.shared, stream.get(),
                          mark.get());
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  EXPECT_EQ(mark.ToHost()[0], 5);
}

TEST(KernelTest, UnknownStream) {
  DeviceArray<int> mark(1);
  cudaemu::LaunchKernel(MarkKernel, "MarkKernel", 1, 1, 0,
                        reinterpret_cast<cudaStream_t>(uintptr_t{0x1234}), mark.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cudaStream_t destroyed = nullptr;
  CUDA_OK(cudaStreamCreate(&destroyed));
  CUDA_OK(cudaStreamDestroy(destroyed));
  cudaemu::LaunchKernel(MarkKernel, "MarkKernel", 1, 1, 0, destroyed, mark.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mark.ToHost()[0], 0);
  // The legacy default stream (0) is a stream.
  cudaemu::LaunchKernel(MarkKernel, "MarkKernel", 1, 1, 0, nullptr, mark.get());
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mark.ToHost()[0], 1);
}

// ---- a launch held by the test (cudaemu::testing::HoldLaunch) ---------------------------------

TEST(KernelTest, AHeldLaunchHoldsItsStreamUntilReleased) {
  DeviceArray<int> mark(1);
  Stream stream;
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  cudaemu::testing::HoldLaunch(2, std::chrono::seconds(60));  // the second launch from now
  for (int k = 0; k < 3; ++k) {
    cudaemu::LaunchKernel(MarkKernel, "MarkKernel", 1, 1, 0, stream.get(), mark.get());
    CUDA_OK(cudaGetLastError());
  }
  // The stream reaches the held launch and stays there: the first launch ran, the others wait.
  const auto start = std::chrono::steady_clock::now();
  while (!cudaemu::testing::LaunchIsHeld() && MillisecondsSince(start) < 60000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(cudaemu::testing::LaunchIsHeld());
  EXPECT_EQ(cudaStreamQuery(stream.get()), cudaErrorNotReady);
  (void)cudaGetLastError();
  EXPECT_EQ(mark.ToHost()[0], 1);  // a copy on the legacy stream: it does not wait for this one
  EXPECT_TRUE(cudaemu::testing::ReleaseHeldLaunch());
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  EXPECT_FALSE(cudaemu::testing::LaunchIsHeld());
  EXPECT_EQ(mark.ToHost()[0], 3);
  // Released before its stream reaches it: it does not wait.
  cudaemu::testing::HoldLaunch(1, std::chrono::seconds(60));
  EXPECT_TRUE(cudaemu::testing::ReleaseHeldLaunch());
  cudaemu::LaunchKernel(MarkKernel, "MarkKernel", 1, 1, 0, stream.get(), mark.get());
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  EXPECT_EQ(mark.ToHost()[0], 4);
  // A hold right after a release, its stream not yet woken: the new hold holds its own
  // launch, never the released one again.
  for (int round = 0; round < 20; ++round) {
    cudaemu::testing::HoldLaunch(1, std::chrono::seconds(60));
    cudaemu::LaunchKernel(MarkKernel, "MarkKernel", 1, 1, 0, stream.get(), mark.get());
    const auto held_at = std::chrono::steady_clock::now();
    while (!cudaemu::testing::LaunchIsHeld() && MillisecondsSince(held_at) < 60000) {
      std::this_thread::yield();
    }
    ASSERT_TRUE(cudaemu::testing::ReleaseHeldLaunch());
    cudaemu::testing::HoldLaunch(2, std::chrono::seconds(60));
    cudaemu::LaunchKernel(MarkKernel, "MarkKernel", 1, 1, 0, stream.get(), mark.get());
    cudaemu::LaunchKernel(MarkKernel, "MarkKernel", 1, 1, 0, stream.get(), mark.get());
    const auto again = std::chrono::steady_clock::now();
    while (!cudaemu::testing::LaunchIsHeld() && MillisecondsSince(again) < 60000) {
      std::this_thread::yield();
    }
    // Held at the second of the two: the released one and the first ran.
    EXPECT_EQ(mark.ToHost()[0], 4 + 3 * round + 2) << "round " << round;
    ASSERT_TRUE(cudaemu::testing::ReleaseHeldLaunch());
    CUDA_OK(cudaStreamSynchronize(stream.get()));
    EXPECT_EQ(mark.ToHost()[0], 4 + 3 * round + 3) << "round " << round;
  }
}

TEST(KernelTest, AHeldLaunchNobodyReleasesRunsAfterItsLimitAndSaysSo) {
  DeviceArray<int> mark(1);
  Stream stream;
  cudaemu::testing::HoldLaunch(1, std::chrono::milliseconds(50));
  testing::internal::CaptureStderr();
  cudaemu::LaunchKernel(MarkKernel, "MarkKernel", 1, 1, 0, stream.get(), mark.get());
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  const std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_EQ(mark.ToHost()[0], 1);
  EXPECT_NE(printed.find("MarkKernel was held"), std::string::npos) << printed;
  EXPECT_FALSE(cudaemu::testing::ReleaseHeldLaunch()) << "the limit let it run";
}

}  // namespace
