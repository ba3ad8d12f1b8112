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
//   one thread — what a replica's forward and backward are made of — with Eigen alone, and
//   as Tower's step computes them (`tower_products`: the weight packed once per step for
//   the 256 / --batch replicas that share it);
//   the products of one mlp training step of R = 2, 4, 8 replicas on T threads (R/T replica
//   turns per thread, every turn its own rows of the global batch of 256, the weights shared
//   as Tower's logical CPU replicas share them), in steps/s and as a ratio to R = 2: the
//   bound the products alone put on "R replicas keep the throughput of T". Three times:
//   through Tower's MatMul op (Eigen, which packs the weights in every product); with oneDNN
//   on weights packed once per step for all replicas (its blocked layout); and as Tower's
//   step computes them (`tower_as_step`: weights packed once per step for every replica,
//   the weight gradients of a thread's replicas folded into one sum).
// Eigen is built with EIGEN_DONT_PARALLELIZE (Tower's threads are its replicas), so the
// T-thread figures use T std::threads. Each figure is the median of --repeats windows.
// --square_only stops after the square products: the roofline alone, in a few seconds
// (with --as_step_products, then the 2 replicas' products as the step computes them).
// (OpenBLAS's rate, through PyTorch, is printed by bench/peers/torch_gemm.py.)
#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <dnnl.hpp>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "bench/bench_util.h"
#include "device/context.h"
#include "device/intra_op.h"
#include "ops/math_ops.h"
#include "ops/tensor.h"
#include "util/check.h"
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

// ---- One mlp training step's products, R replicas on T threads.
// The 256 -> 1024 -> 1024 -> 1 mlp: per replica of b rows, forward x·W1 [b,256]x[256,1024]
// and h1·W2 [b,1024]x[1024,1024]; backward the weight gradients h1ᵀ·dh2 and xᵀ·dh1 and the
// input gradient dh2·W2ᵀ (the 1-wide last layer is left out: < 0.1 % of the flops).

extern "C" void omp_set_num_threads(int threads);

// A replica's own activations and gradients (its rows of the global batch).
struct ReplicaBuffers {
  explicit ReplicaBuffers(int64_t rows)
      : x(Matrix::Random(rows, 256)), h1(rows, 1024), h2(rows, 1024),
        dh2(Matrix::Random(rows, 1024)), dh1(rows, 1024), dw1(256, 1024), dw2(1024, 1024) {}
  Matrix x, h1, h2, dh2, dh1, dw1, dw2;
};

// One replica turn's products through Tower's own MatMul op (ops/cpu/math_kernels.cc) on
// one intra-op thread, as a replica running beside others gets; each output is a new
// tensor from the device's allocator, as in a training step. x [rows, 256], dh2 [rows, 1024].
struct TowerTurn {
  TowerTurn(tower::Device* device, const ReplicaBuffers& b, const tower::Tensor& w1,
            const tower::Tensor& w2)
      : x(Upload(device, b.x)), dh2(Upload(device, b.dh2)), w1(w1), w2(w2) {}
  static tower::Tensor Upload(tower::Device* device, const Matrix& m) {
    return tower::Tensor::FromHostBytes(device, tower::Shape({m.rows(), m.cols()}),
                                        tower::DType::kFloat32, m.data())
        .value();
  }
  tower::Status Run() const {
    TOWER_ASSIGN_OR_RETURN(tower::Tensor h1, tower::ops::MatMul(x, w1));
    TOWER_ASSIGN_OR_RETURN(tower::Tensor h2, tower::ops::MatMul(h1, w2));
    TOWER_ASSIGN_OR_RETURN(tower::Tensor dw2, tower::ops::MatMul(h1, dh2, true, false));
    TOWER_ASSIGN_OR_RETURN(tower::Tensor dh1, tower::ops::MatMul(dh2, w2, false, true));
    TOWER_ASSIGN_OR_RETURN(tower::Tensor dw1, tower::ops::MatMul(x, dh1, true, false));
    return tower::OkStatus();
  }
  // The same products as a training step computes them (model/dense.cc, ops/cpu/
  // shared_packing.h, strategy/reducers/gradient_folding.h): the forward and input-gradient
  // products
  // read the weights packed once per step (`version`) for every replica; the weight gradients
  // of the replicas that share a thread are folded: the thread's first replica writes them
  // (`sums` empty), each later one adds its own into them.
  tower::Status RunAsStep(uint64_t version, tower::Tensor sums[2]) const {
    TOWER_ASSIGN_OR_RETURN(tower::Tensor h1, tower::ops::MatMulByWeight(x, w1, false, version));
    TOWER_ASSIGN_OR_RETURN(tower::Tensor h2, tower::ops::MatMulByWeight(h1, w2, false, version));
    const bool first = !sums[1].valid();
    if (first) {
      TOWER_ASSIGN_OR_RETURN(sums[1], tower::ops::MatMul(h1, dh2, true, false));
    } else {
      TOWER_RETURN_IF_ERROR(tower::ops::MatMulAddInto(h1, dh2, true, false, sums[1]));
    }
    TOWER_ASSIGN_OR_RETURN(tower::Tensor dh1, tower::ops::MatMulByWeight(dh2, w2, true, version));
    if (first) {
      TOWER_ASSIGN_OR_RETURN(sums[0], tower::ops::MatMul(x, dh1, true, false));
    } else {
      TOWER_RETURN_IF_ERROR(tower::ops::MatMulAddInto(x, dh1, true, false, sums[0]));
    }
    return tower::OkStatus();
  }
  tower::Tensor x, dh2, w1, w2;
};

// The products of one replica turn with oneDNN, the weights (W1, W2 and W2ᵀ) in the blocked
// layouts its primitives chose, packed once per step and shared by every replica.
class PackedProducts {
 public:
  PackedProducts(int64_t rows, float* w1, float* w2) : engine_(dnnl::engine::kind::cpu, 0) {
    using dnnl::memory;
    const auto f32 = memory::data_type::f32;
    const auto plain = memory::format_tag::ab, transposed = memory::format_tag::ba,
               any = memory::format_tag::any;
    x_ = memory::desc({rows, 256}, f32, plain);
    h_ = memory::desc({rows, 1024}, f32, plain);
    xt_ = memory::desc({256, rows}, f32, transposed);
    ht_ = memory::desc({1024, rows}, f32, transposed);
    dw1_ = memory::desc({256, 1024}, f32, plain);
    dw2_ = memory::desc({1024, 1024}, f32, plain);
    auto desc = [&](const memory::desc& a, const memory::desc& b, const memory::desc& c) {
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), engine_);
    };
    const auto forward1 = desc(x_, memory::desc({256, 1024}, f32, any), h_);
    const auto forward2 = desc(h_, memory::desc({1024, 1024}, f32, any), h_);
    const auto input_grad = desc(h_, memory::desc({1024, 1024}, f32, any), h_);
    forward1_ = dnnl::matmul(forward1);
    forward2_ = dnnl::matmul(forward2);
    input_grad_ = dnnl::matmul(input_grad);
    weight_grad1_ = dnnl::matmul(desc(xt_, h_, dw1_));
    weight_grad2_ = dnnl::matmul(desc(ht_, h_, dw2_));
    weights_[kW1] = memory(dw1_, engine_, w1);
    weights_[kW2] = memory(dw2_, engine_, w2);
    weights_[kW2Transposed] = memory(memory::desc({1024, 1024}, f32, transposed), engine_, w2);
    packed_[kW1] = memory(forward1.weights_desc(), engine_);
    packed_[kW2] = memory(forward2.weights_desc(), engine_);
    packed_[kW2Transposed] = memory(input_grad.weights_desc(), engine_);
  }
  static constexpr int kW1 = 0, kW2 = 1, kW2Transposed = 2, kWeights = 3;
  // Packs weight `which` (kW1, kW2 or kW2Transposed) for this step.
  void Pack(int which) {
    dnnl::stream stream(engine_);
    dnnl::reorder(weights_[which], packed_[which]).execute(stream, weights_[which], packed_[which]);
  }
  void Turn(ReplicaBuffers& r) {
    using dnnl::memory;
    dnnl::stream stream(engine_);
    memory x(x_, engine_, r.x.data()), h1(h_, engine_, r.h1.data()), h2(h_, engine_, r.h2.data()),
        dh2(h_, engine_, r.dh2.data()), dh1(h_, engine_, r.dh1.data()),
        dw1(dw1_, engine_, r.dw1.data()), dw2(dw2_, engine_, r.dw2.data()),
        xt(xt_, engine_, r.x.data()), h1t(ht_, engine_, r.h1.data());
    forward1_.execute(stream, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, packed_[kW1]}, {DNNL_ARG_DST, h1}});
    forward2_.execute(stream, {{DNNL_ARG_SRC, h1}, {DNNL_ARG_WEIGHTS, packed_[kW2]}, {DNNL_ARG_DST, h2}});
    weight_grad2_.execute(stream, {{DNNL_ARG_SRC, h1t}, {DNNL_ARG_WEIGHTS, dh2}, {DNNL_ARG_DST, dw2}});
    input_grad_.execute(stream, {{DNNL_ARG_SRC, dh2}, {DNNL_ARG_WEIGHTS, packed_[kW2Transposed]}, {DNNL_ARG_DST, dh1}});
    weight_grad1_.execute(stream, {{DNNL_ARG_SRC, xt}, {DNNL_ARG_WEIGHTS, dh1}, {DNNL_ARG_DST, dw1}});
  }

 private:
  dnnl::engine engine_;
  dnnl::memory::desc x_, h_, xt_, ht_, dw1_, dw2_;
  dnnl::matmul forward1_, forward2_, input_grad_, weight_grad1_, weight_grad2_;
  dnnl::memory weights_[kWeights];  // the shared weights in place, row-major
  dnnl::memory packed_[kWeights];   // the same, in the layouts the primitives chose
};

// A barrier of T threads that spin (a step is milliseconds; the wait is short).
class SpinBarrier {
 public:
  explicit SpinBarrier(int threads) : threads_(threads) {}
  void Wait() {
    const int phase = phase_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads_) {
      arrived_.store(0, std::memory_order_relaxed);
      phase_.store(phase + 1, std::memory_order_release);
    } else {
      while (phase_.load(std::memory_order_acquire) == phase) std::this_thread::yield();
    }
  }

 private:
  const int threads_;
  std::atomic<int> arrived_{0};
  std::atomic<int> phase_{0};
};

// How ReplicaProductsRate computes a replica's products.
enum class ProductsKind {
  kEigen,       // Tower's MatMul op: each product packs its weight
  kOneDnn,      // oneDNN, the weights packed once per step (a barrier before the turns)
  kAsTheStep,   // as the training step: weights packed once per step, gradients folded
};
const char* NameOf(ProductsKind kind) {
  switch (kind) {
    case ProductsKind::kEigen: return "eigen";
    case ProductsKind::kOneDnn: return "onednn_packed_once";
    case ProductsKind::kAsTheStep: return "tower_as_step";
  }
  return "?";
}

// Steps/s of the products of `replicas` replicas on `threads` threads (thread t runs
// replicas t, t + threads, ...), median of `repeats` windows of `steps` steps. oneDNN: each
// step first packs the three weights (spread over the threads), then a barrier, then the
// turns; Eigen: the turns only (each product packs for itself); as the step: the turns,
// the first product of each weight in a step packing it with whoever multiplies by it then.
double ReplicaProductsRate(int replicas, int threads, ProductsKind kind, int64_t steps,
                           int repeats) {
  const bool packed = kind == ProductsKind::kOneDnn;
  const int64_t rows = 256 / replicas;
  Matrix w1 = Matrix::Random(256, 1024), w2 = Matrix::Random(1024, 1024);
  std::vector<std::unique_ptr<ReplicaBuffers>> buffers;
  for (int r = 0; r < replicas; ++r) buffers.push_back(std::make_unique<ReplicaBuffers>(rows));
  PackedProducts dnnl_products(rows, w1.data(), w2.data());
  // The CPU, also where a GPU is the default device: this program measures the host.
  tower::Device* const cpu = tower::Context::Global().FindDevice("/CPU:0").value();
  const tower::Tensor w1_tensor = TowerTurn::Upload(cpu, w1), w2_tensor = TowerTurn::Upload(cpu, w2);
  std::vector<TowerTurn> tower_turns;
  for (const auto& b : buffers) tower_turns.emplace_back(cpu, *b, w1_tensor, w2_tensor);
  // A new weight version per step, as a model's steps give, never one an earlier call used
  // (its weights may have had the same addresses).
  static uint64_t next_version = 1;
  auto run = [&](int64_t n) {
    SpinBarrier barrier(threads);
    auto body = [&](int t) {
      omp_set_num_threads(1);  // one thread per replica thread, as in Tower's half_matmul
      const tower::ScopedIntraOpThreads one_thread(1);
      for (int64_t step = 0; step < n; ++step) {
        if (kind == ProductsKind::kAsTheStep) {
          tower::Tensor sums[2];  // this thread's folded dW1, dW2
          for (int r = t; r < replicas; r += threads) {
            TOWER_CHECK_OK(tower_turns[r].RunAsStep(next_version + step, sums));
          }
          barrier.Wait();  // the all-reduce would wait for every thread's sums
          continue;
        }
        if (packed) {
          for (int which = t; which < PackedProducts::kWeights; which += threads) dnnl_products.Pack(which);
          barrier.Wait();
        }
        for (int r = t; r < replicas; r += threads) {
          if (packed) {
            dnnl_products.Turn(*buffers[r]);
          } else {
            TOWER_CHECK_OK(tower_turns[r].Run());
          }
        }
        if (packed) barrier.Wait();  // the next step's packing waits for every turn
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(body, t);
    body(0);
    for (std::thread& thread : pool) thread.join();
    next_version += static_cast<uint64_t>(n);
  };
  run(2);  // warm-up: oneDNN compiles its kernels, the buffers are touched
  std::vector<double> rates;
  for (int rep = 0; rep < repeats; ++rep) {
    const auto start = Clock::now();
    run(steps);
    rates.push_back(steps / std::chrono::duration<double>(Clock::now() - start).count());
  }
  return Median(rates);
}

// The square products: one thread, T threads each its own, T threads splitting one.
void PrintSquareProducts(int64_t size, int T, int64_t iters, int R) {
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
}

// The mlp's 1024×1024 products at `batch` rows, one thread: Eigen alone, and as the step
// computes them.
void PrintMlpShapes(int64_t batch, int64_t iters, int R) {
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
  // The same products as the step computes them: the forward and input-gradient products
  // through ops::MatMulByWeight, whose weight is packed once per step for every replica
  // (ops/cpu/shared_packing.h), the weight gradient through ops::MatMul. A step of
  // `shares` = 256 / batch replicas packs each weight once: here a new version every
  // `shares` products, so each product pays its share of one packing.
  {
    tower::Device* const cpu = tower::Context::Global().FindDevice("/CPU:0").value();
    const tower::ScopedIntraOpThreads one_thread(1);
    const auto upload = [&](const Matrix& values) { return TowerTurn::Upload(cpu, values); };
    const tower::Tensor tx = upload(x), tw = upload(w), tdz = upload(dz);
    const int64_t shares = std::max<int64_t>(1, 256 / batch);
    uint64_t calls = 0;
    const auto version = [&] { return 1000 + calls++ / static_cast<uint64_t>(shares); };
    const double shared_fwd = Rate(1, small_iters, R, f, [&](int) {
      (void)tower::ops::MatMulByWeight(tx, tw, false, version()).value();
    });
    const double tower_wgrad = Rate(1, small_iters, R, f, [&](int) {
      (void)tower::ops::MatMul(tx, tdz, true, false).value();
    });
    calls = 0;
    const double shared_xgrad = Rate(1, small_iters, R, f, [&](int) {
      (void)tower::ops::MatMulByWeight(tdz, tw, true, version()).value();
    });
    std::printf("tower_products mlp_shapes batch=%lld threads=1 weight_packed_per=%lld "
                "forward=%.1f weight_grad=%.1f input_grad=%.1f gflops\n",
                static_cast<long long>(batch), static_cast<long long>(shares), shared_fwd,
                tower_wgrad, shared_xgrad);
  }

}

// One figure of ReplicaProductsRate: `rate` steps/s of `replicas` replicas on T threads,
// against `two`, the same kind's rate with 2 replicas.
void PrintReplicaProductsLine(ProductsKind kind, int replicas, int T, double rate, double two) {
  std::printf("mlp_replica_products kind=%s replicas=%d threads=%d rows=%d steps_per_s=%.1f "
              "vs_2_replicas=%.3f\n",
              NameOf(kind), replicas, T, 256 / replicas, rate, rate / two);
}

// One mlp step's products of 2, 4 and 8 replicas on T threads, in each ProductsKind.
void PrintReplicaProducts(int T, int64_t iters, int R) {
  // The products of one mlp step of R replicas on T threads, R = 2, 4, 8; each kind's
  // figures interleaved in rounds so that the host's phases fall on all of them alike.
  const ProductsKind kinds_of[] = {ProductsKind::kEigen, ProductsKind::kOneDnn,
                                   ProductsKind::kAsTheStep};
  const int kinds = 3;
  const int replica_counts[] = {2, 4, 8};
  std::vector<double> step_rates[kinds][3];
  for (int round = 0; round < R; ++round) {
    for (int kind = 0; kind < kinds; ++kind) {
      for (int i = 0; i < 3; ++i) {
        step_rates[kind][i].push_back(
            ReplicaProductsRate(replica_counts[i], T, kinds_of[kind], std::max<int64_t>(iters, 4), 1));
      }
    }
  }
  for (int kind = 0; kind < kinds; ++kind) {
    const double two = Median(step_rates[kind][0]);
    for (int i = 0; i < 3; ++i) {
      const double rate = Median(step_rates[kind][i]);
      PrintReplicaProductsLine(kinds_of[kind], replica_counts[i], T, rate, two);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t size = 1024, threads = 2, repeats = 3, iters = 20, batch = 128;
  bool replica_products = true;
  bool square_only = false;
  bool as_step_products = false;
  tower::FlagParser parser("gemm_roofline");
  parser.AddInt("size", &size, "m = n = k of the square product");
  parser.AddInt("threads", &threads, "threads of the multi-thread figures");
  parser.AddInt("repeats", &repeats, "timed windows; the median is printed");
  parser.AddInt("iters", &iters, "products per thread per window (square)");
  parser.AddInt("batch", &batch, "rows of the mlp-shaped products");
  parser.AddBool("replica_products", &replica_products,
                 "also time one mlp step's products of 2, 4 and 8 replicas on --threads threads");
  parser.AddBool("square_only", &square_only,
                 "time only the square products (1 and --threads threads): the roofline "
                 "alone, as compare.sh's rounds take it beside each training figure");
  parser.AddBool("as_step_products", &as_step_products,
                 "with --square_only: then one mlp step's products of 2 replicas on --threads "
                 "threads as the step computes them (tower_as_step), what the rounds take "
                 "beside the roofline");
  tower::Status status = parser.Parse(argc, argv, 1);
  if (!status.ok() || parser.help_requested()) {
    if (!status.ok()) std::fprintf(stderr, "error: %s\n", status.message().c_str());
    std::printf("%s", parser.Usage().c_str());
    return status.ok() ? 0 : 2;
  }
  for (const auto& [name, value] : {std::pair<const char*, int64_t>{"size", size},
                                    {"threads", threads},
                                    {"repeats", repeats},
                                    {"iters", iters},
                                    {"batch", batch}}) {
    if (value < 1) {
      std::fprintf(stderr, "error: --%s=%lld: must be at least 1\n", name,
                   static_cast<long long>(value));
      return 2;
    }
  }
  const int T = static_cast<int>(threads);
  const int R = static_cast<int>(repeats);
  PrintSquareProducts(size, T, iters, R);
  if (square_only) {
    if (as_step_products) {
      const double rate = ReplicaProductsRate(2, T, ProductsKind::kAsTheStep,
                                              std::max<int64_t>(iters * 4, 4), R);
      PrintReplicaProductsLine(ProductsKind::kAsTheStep, 2, T, rate, rate);
    }
    return 0;
  }

  PrintMlpShapes(batch, iters, R);
  if (!replica_products) return 0;
  PrintReplicaProducts(T, iters, R);
  return 0;
}
