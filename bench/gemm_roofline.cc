// gemm_roofline: the machine's SGEMM rate with Eigen (the library of Tower's CPU MatMul,
// built with the same flags), the roofline of the mlp workload's step compute.
//
//   bazel-bin/bench/gemm_roofline [--size=1024] [--threads=2]
//
// Prints GFLOP/s (2·m·n·k per product) for:
//   1 thread, one 1024³ product;
//   T threads, each its own 1024³ product at once (what T data-parallel replicas do);
//   T threads splitting one 1024³ product by columns;
//   the mlp workload's own products at 128 rows (its per-replica batch with 2 replicas),
//   one thread — what a replica's forward and backward are made of.
// Eigen is built with EIGEN_DONT_PARALLELIZE (Tower's threads are its replicas), so the
// T-thread figures use T std::threads. Each figure is the median of --repeats windows.
// (OpenBLAS's rate, through PyTorch, is printed by bench/peers/torch_gemm.py.)
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "util/flags.h"

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Clock = std::chrono::steady_clock;

using tower::bench::Median;

// GFLOP/s of `threads` threads each running `work(thread)` (flops_per_call each) `iters`
// times, median of `repeats` windows.
double Rate(int threads, int64_t iters, int repeats, double flops_per_call,
            const std::function<void(int)>& work) {
  for (int t = 0; t < threads; ++t) work(t);  // warm-up (single-threaded is fine)
  std::vector<double> rates;
  for (int rep = 0; rep < repeats; ++rep) {
    std::vector<std::thread> pool;
    const auto start = Clock::now();
    for (int t = 1; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int64_t i = 0; i < iters; ++i) work(t);
      });
    }
    for (int64_t i = 0; i < iters; ++i) work(0);
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    rates.push_back(flops_per_call * threads * iters / s / 1e9);
  }
  return Median(rates);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t size = 1024, threads = 2, repeats = 3, iters = 20, batch = 128;
  tower::FlagParser parser("gemm_roofline");
  parser.AddInt("size", &size, "m = n = k of the square product");
  parser.AddInt("threads", &threads, "threads of the multi-thread figures");
  parser.AddInt("repeats", &repeats, "timed windows; the median is printed");
  parser.AddInt("iters", &iters, "products per thread per window (square)");
  parser.AddInt("batch", &batch, "rows of the mlp-shaped products");
  tower::Status status = parser.Parse(argc, argv, 1);
  if (!status.ok() || parser.help_requested()) {
    if (!status.ok()) std::fprintf(stderr, "error: %s\n", status.message().c_str());
    std::printf("%s", parser.Usage().c_str());
    return status.ok() ? 0 : 2;
  }
  const int T = static_cast<int>(threads);
  const int R = static_cast<int>(repeats);
  const double flops = 2.0 * size * size * size;
  std::vector<Matrix> a, b, c;
  for (int t = 0; t < T; ++t) {
    a.push_back(Matrix::Random(size, size));
    b.push_back(Matrix::Random(size, size));
    c.push_back(Matrix::Zero(size, size));
  }
  auto own = [&](int t) { c[t].noalias() = a[t] * b[t]; };
  const double one = Rate(1, iters, R, flops, own);
  const double many = Rate(T, iters, R, flops, own);
  const int64_t cols = size / T;
  auto split = [&](int t) {
    c[0].middleCols(t * cols, cols).noalias() = a[0] * b[0].middleCols(t * cols, cols);
  };
  const double split_rate = Rate(T, iters, R, flops / T, split);
  std::printf("eigen_sgemm size=%lld threads=1 gflops=%.1f\n", static_cast<long long>(size), one);
  std::printf("eigen_sgemm size=%lld threads=%d gflops=%.1f (independent products)\n",
              static_cast<long long>(size), T, many);
  std::printf("eigen_sgemm size=%lld threads=%d gflops=%.1f (one product split by columns)\n",
              static_cast<long long>(size), T, split_rate);

  // The mlp workload's products, per replica with `batch` rows: forward x·W, backward
  // xᵀ·dz (weight gradient) and dz·Wᵀ (input gradient), for the 1024×1024 layer.
  const int64_t m = batch, k = 1024, n = 1024;
  Matrix x = Matrix::Random(m, k), w = Matrix::Random(k, n), dz = Matrix::Random(m, n);
  Matrix y(m, n), dw(k, n), dx(m, k);
  const double f = 2.0 * m * k * n;
  const int64_t small_iters = std::max<int64_t>(iters * 8, 1);
  const double fwd = Rate(1, small_iters, R, f, [&](int) { y.noalias() = x * w; });
  const double wgrad = Rate(1, small_iters, R, f, [&](int) { dw.noalias() = x.transpose() * dz; });
  const double xgrad = Rate(1, small_iters, R, f, [&](int) { dx.noalias() = dz * w.transpose(); });
  std::printf("eigen_sgemm mlp_shapes batch=%lld threads=1 forward=%.1f weight_grad=%.1f "
              "input_grad=%.1f gflops\n",
              static_cast<long long>(batch), fwd, wgrad, xgrad);
  return 0;
}
