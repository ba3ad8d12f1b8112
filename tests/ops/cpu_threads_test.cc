// CPU kernels split over intra-op threads (device/intra_op.h): MatMul (ops/cpu/math_kernels.cc)
// against a plain triple loop written here, on odd shapes and every transpose; the same bits
// on every run, with any thread count, and when the pool is held by another call. The
// optimizer updates (ops/cpu/training_kernels.cc) against plain loops, with the bits of one
// thread, on whole tensors and on a view that starts off a 64-byte boundary.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device/config.h"
#include "device/context.h"
#include "device/intra_op.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/training_ops.h"
#include "tests/testing/held_intra_op_pool.h"
#include "tests/testing/random_values.h"
#include "tests/testing/same_bits.h"

namespace tower {
namespace {

using Values = std::vector<float>;
using testing::SameBits;

constexpr double kEps = 1.1920929e-07;  // float32 machine epsilon

// Three intra-op threads for the whole process, set before the first tensor initialises the
// runtime (later calls set the same value, which is allowed): the pool then has two workers
// on any machine, so the splits below really run on several threads.
void UseThreeIntraOpThreads() {
  Status status = config::SetIntraOpParallelismThreads(3);
  ASSERT_TRUE(status.ok()) << status;
}

Device* Cpu() { return *Context::Global().FindDevice("/CPU:0"); }

Values RandomValues(int64_t n, uint32_t seed) { return testing::UniformValues(n, seed); }

struct Case {
  int64_t m, k, n;
  bool transpose_a, transpose_b;
  std::string Name() const {
    return std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) +
           (transpose_a ? " Aᵀ" : "") + (transpose_b ? " Bᵀ" : "");
  }
};

// The operands as stored: a is [m, k] ([k, m] transposed), b is [k, n] ([n, k] transposed).
struct Operands {
  Values a, b;
};

Operands MakeOperands(const Case& c, uint32_t seed) {
  return {RandomValues(c.m * c.k, seed), RandomValues(c.k * c.n, seed + 1)};
}

// The kernel, with `threads` intra-op threads on this thread.
Values RunMatMul(const Case& c, const Operands& x, int threads) {
  ScopedIntraOpThreads budget(threads);
  StatusOr<Tensor> a = Tensor::FromHost(
      Cpu(), c.transpose_a ? Shape({c.k, c.m}) : Shape({c.m, c.k}), x.a);
  StatusOr<Tensor> b = Tensor::FromHost(
      Cpu(), c.transpose_b ? Shape({c.n, c.k}) : Shape({c.k, c.n}), x.b);
  TOWER_CHECK_OK(a.status());
  TOWER_CHECK_OK(b.status());
  StatusOr<Tensor> product = ops::MatMul(*a, *b, c.transpose_a, c.transpose_b);
  TOWER_CHECK_OK(product.status());
  StatusOr<Values> host = product->ToHost();
  TOWER_CHECK_OK(host.status());
  return *host;
}

// Σ_k op(a)[i, k] · op(b)[k, j] in double, and Σ_k |op(a)[i, k] · op(b)[k, j]| for the bound.
void Reference(const Case& c, const Operands& x, std::vector<double>* sum,
               std::vector<double>* magnitude) {
  sum->assign(static_cast<size_t>(c.m * c.n), 0.0);
  magnitude->assign(sum->size(), 0.0);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0, mag = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double av = c.transpose_a ? x.a[p * c.m + i] : x.a[i * c.k + p];
        const double bv = c.transpose_b ? x.b[j * c.k + p] : x.b[p * c.n + j];
        s += av * bv;
        mag += std::fabs(av * bv);
      }
      (*sum)[i * c.n + j] = s;
      (*magnitude)[i * c.n + j] = mag;
    }
  }
}

std::vector<Case> WithEveryTranspose(const std::vector<Case>& shapes) {
  std::vector<Case> out;
  for (const Case& s : shapes) {
    for (int t = 0; t < 4; ++t) out.push_back({s.m, s.k, s.n, (t & 1) != 0, (t & 2) != 0});
  }
  return out;
}

// Odd sizes: column splits with a leftover narrower than the alignment, uneven shares,
// a product split by rows (n too narrow for two column chunks), and one too small to split.
const std::vector<Case>& OddCases() {
  static const std::vector<Case> cases = WithEveryTranspose({
      {131, 257, 1031, false, false},  // columns: 21 units of 48 + 23 left over
      {97, 300, 145, false, false},    // columns: 3 units, 48/48/49 with 3 threads
      {1031, 257, 37, false, false},   // rows
      {333, 129, 95, false, false},    // 1 column unit: rows
      {5, 7, 3, false, false},         // no split
  });
  return cases;
}

// The mlp workload's products (docs/BENCHMARKS.md): forward, then backward's dW and dX, for a
// replica's 128 rows and for 1 replica's 256.
const std::vector<Case>& MlpCases() {
  static const std::vector<Case> cases = {
      {128, 256, 1024, false, false},   {128, 1024, 1024, false, false},
      {256, 128, 1024, true, false},    {1024, 128, 1024, true, false},
      {128, 1024, 1024, false, true},   {256, 1024, 1024, false, false},
      {1024, 256, 1024, true, false},   {256, 1024, 1024, false, true},
      {128, 1024, 1, false, false},     {128, 1, 1024, false, true},
  };
  return cases;
}

TEST(MatMulThreadsTest, SplitProductsMatchATripleLoop) {
  UseThreeIntraOpThreads();
  const uint64_t splits_before = IntraOpPool::Global().split_calls();
  uint32_t seed = 1;
  for (const Case& c : OddCases()) {
    const Operands x = MakeOperands(c, seed += 2);
    std::vector<double> want, magnitude;
    Reference(c, x, &want, &magnitude);
    for (int threads : {2, 3}) {
      const Values got = RunMatMul(c, x, threads);
      ASSERT_EQ(got.size(), want.size());
      int failures = 0;
      for (size_t i = 0; i < got.size() && failures < 5; ++i) {
        // Written so that a NaN fails: |got − want| <= 2·k·ε·Σ|a·b|.
        const double bound = 2.0 * static_cast<double>(c.k) * kEps * magnitude[i] + 1e-30;
        if (!(std::fabs(got[i] - want[i]) <= bound)) {
          ++failures;
          ADD_FAILURE() << c.Name() << " threads=" << threads << " element " << i << " (row "
                        << i / c.n << ", column " << i % c.n << "): " << got[i] << " vs "
                        << want[i] << " ± " << bound;
        }
      }
    }
  }
  // The split path ran (the reference check alone would pass without it).
  EXPECT_GE(IntraOpPool::Global().split_calls() - splits_before, 8u * 4u);
}

TEST(MatMulThreadsTest, RepeatedRunsAreTheSameBits) {
  UseThreeIntraOpThreads();
  std::vector<Case> cases = OddCases();
  cases.insert(cases.end(), MlpCases().begin(), MlpCases().end());
  uint32_t seed = 100;
  for (const Case& c : cases) {
    const Operands x = MakeOperands(c, seed += 2);
    const Operands other = MakeOperands(c, seed + 1000);
    for (int threads : {1, 2, 3}) {
      const Values first = RunMatMul(c, x, threads);
      for (int repeat = 0; repeat < 3; ++repeat) {
        // Other values first in the memory the output will likely reuse: a chunk left
        // unwritten cannot pass for a computed one.
        RunMatMul(c, other, threads);
        EXPECT_TRUE(SameBits(RunMatMul(c, x, threads), first))
            << c.Name() << " threads=" << threads << " repeat " << repeat;
      }
    }
  }
}

// Column chunks start at multiples of 48 (Eigen's row groups): each element is summed in the
// same order as in the whole product, so the thread count never changes the bits. This keeps
// --deterministic's promise (the same bytes on any topology) whatever share of the cores each
// replica gets.
TEST(MatMulThreadsTest, AnyThreadCountGivesTheBitsOfOneThread) {
  UseThreeIntraOpThreads();
  std::vector<Case> cases = OddCases();
  cases.insert(cases.end(), MlpCases().begin(), MlpCases().end());
  uint32_t seed = 200;
  for (const Case& c : cases) {
    const Operands x = MakeOperands(c, seed += 2);
    const Values one = RunMatMul(c, x, 1);
    for (int threads : {2, 3, 4, 5, 8}) {
      EXPECT_TRUE(SameBits(RunMatMul(c, x, threads), one)) << c.Name() << " threads=" << threads;
    }
  }
}

// While another call holds the pool, a split product runs every chunk on its caller: the same
// chunks, so the same bits as with the pool's help.
TEST(MatMulThreadsTest, BusyPoolFallsBackToTheCallerWithTheSameBits) {
  UseThreeIntraOpThreads();
  IntraOpPool& pool = IntraOpPool::Global();
  ASSERT_GE(pool.workers(), 1);
  const Case c{128, 1024, 1024, false, false};
  const Operands x = MakeOperands(c, 7);
  const Values free_pool = RunMatMul(c, x, 2);
  // Another product of the same size, so that the memory the next output is likely to reuse
  // holds other values: a chunk the fallback skipped would show.
  const Values other = RunMatMul(c, MakeOperands(c, 8), 2);
  ASSERT_FALSE(SameBits(other, free_pool));

  // Another thread holds the pool: its chunks wait until released.
  uint64_t fallbacks = 0;
  Values busy_pool;
  {
    testing::HeldIntraOpPool held(pool, /*entered=*/1);
    const uint64_t fallbacks_before = pool.busy_fallbacks();
    busy_pool = RunMatMul(c, x, 2);
    fallbacks = pool.busy_fallbacks() - fallbacks_before;
  }

  EXPECT_EQ(fallbacks, 1u);
  EXPECT_TRUE(SameBits(busy_pool, free_pool));
}


// ---- Optimizer updates.

enum class Update { kSgd, kMomentum, kNesterov, kAdam };

const char* NameOf(Update u) {
  switch (u) {
    case Update::kSgd: return "sgd";
    case Update::kMomentum: return "momentum";
    case Update::kNesterov: return "nesterov";
    case Update::kAdam: return "adam";
  }
  return "?";
}

constexpr int64_t kUpdateRows = 100001;  // × 3 columns: 300003 floats, an odd count
constexpr float kLr = 0.01f, kMomentum = 0.9f, kBeta1 = 0.9f, kBeta2 = 0.999f, kEpsilon = 1e-7f;

struct UpdateState {
  Values var, slot1, slot2;  // velocity, or Adam's m and v
};

// Two steps of `u` with `threads` intra-op threads. With `offset`, every tensor is a view one
// row into a larger buffer (12 bytes off its 256-byte-aligned start), so that the split has
// to find the 64-byte boundaries itself.
UpdateState RunUpdate(Update u, int threads, bool offset, const UpdateState& start,
                      const Values& grad_values) {
  ScopedIntraOpThreads budget(threads);
  const Shape shape({kUpdateRows, 3});
  auto make = [&](const Values& values) {
    Values padded = values;
    if (offset) {
      padded.insert(padded.begin(), {9.0f, 9.0f, 9.0f});
      padded.insert(padded.end(), {9.0f, 9.0f, 9.0f});
    }
    StatusOr<Tensor> t =
        Tensor::FromHost(Cpu(), offset ? Shape({kUpdateRows + 2, 3}) : shape, padded);
    TOWER_CHECK_OK(t.status());
    if (!offset) return *t;
    StatusOr<Tensor> view = t->Slice(1, kUpdateRows + 1);
    TOWER_CHECK_OK(view.status());
    return *view;
  };
  Tensor var = make(start.var), slot1 = make(start.slot1), slot2 = make(start.slot2);
  const Tensor grad = make(grad_values);
  for (int step = 1; step <= 2; ++step) {
    Status status;
    switch (u) {
      case Update::kSgd: status = ops::ApplySgd(var, grad, kLr); break;
      case Update::kMomentum:
        status = ops::ApplySgdMomentum(var, slot1, grad, kLr, kMomentum, false);
        break;
      case Update::kNesterov:
        status = ops::ApplySgdMomentum(var, slot1, grad, kLr, kMomentum, true);
        break;
      case Update::kAdam:
        status = ops::ApplyAdam(var, slot1, slot2, grad, kLr, kBeta1, kBeta2, kEpsilon, step);
        break;
    }
    TOWER_CHECK_OK(status);
  }
  auto host = [](const Tensor& t) {
    StatusOr<Values> values = t.ToHost();
    TOWER_CHECK_OK(values.status());
    return *values;
  };
  return {host(var), host(slot1), host(slot2)};
}

// The same two steps, one element at a time, in double.
UpdateState PlainUpdate(Update u, const UpdateState& start, const Values& grad) {
  UpdateState out = start;
  for (size_t i = 0; i < grad.size(); ++i) {
    double var = start.var[i], s1 = start.slot1[i], s2 = start.slot2[i];
    const double g = grad[i];
    for (int step = 1; step <= 2; ++step) {
      if (u == Update::kSgd) {
        var -= kLr * g;
      } else if (u == Update::kAdam) {
        s1 += (1 - double{kBeta1}) * (g - s1);
        s2 += (1 - double{kBeta2}) * (g * g - s2);
        const double alpha = kLr * std::sqrt(1 - std::pow(double{kBeta2}, step)) /
                             (1 - std::pow(double{kBeta1}, step));
        var -= alpha * s1 / (std::sqrt(s2) + kEpsilon);
      } else {
        s1 = kMomentum * s1 - kLr * g;
        var += u == Update::kNesterov ? kMomentum * s1 - kLr * g : s1;
      }
    }
    out.var[i] = static_cast<float>(var);
    out.slot1[i] = static_cast<float>(s1);
    out.slot2[i] = static_cast<float>(s2);
  }
  return out;
}

TEST(UpdateThreadsTest, SplitUpdatesMatchPlainLoopsAndTheBitsOfOneThread) {
  UseThreeIntraOpThreads();
  const int64_t n = kUpdateRows * 3;
  UpdateState start{RandomValues(n, 31), RandomValues(n, 32), RandomValues(n, 33)};
  for (float& x : start.slot2) x = std::fabs(x);  // Adam's v is a mean of squares
  const Values grad = RandomValues(n, 34);
  const uint64_t splits_before = IntraOpPool::Global().split_calls();
  for (Update u : {Update::kSgd, Update::kMomentum, Update::kNesterov, Update::kAdam}) {
    const UpdateState want = PlainUpdate(u, start, grad);
    for (bool offset : {false, true}) {
      const std::string what = std::string(NameOf(u)) + (offset ? " (view)" : "");
      const UpdateState one = RunUpdate(u, 1, offset, start, grad);
      int failures = 0;
      for (size_t i = 0; i < one.var.size() && failures < 5; ++i) {
        // A few float roundings of values of order 1; written so that a NaN fails.
        if (!(std::fabs(one.var[i] - want.var[i]) <= 1e-5 &&
              std::fabs(one.slot1[i] - want.slot1[i]) <= 1e-5 &&
              std::fabs(one.slot2[i] - want.slot2[i]) <= 1e-5)) {
          ++failures;
          ADD_FAILURE() << what << " element " << i << ": var " << one.var[i] << " vs "
                        << want.var[i] << ", slots " << one.slot1[i] << "/" << one.slot2[i]
                        << " vs " << want.slot1[i] << "/" << want.slot2[i];
        }
      }
      for (int threads : {2, 3}) {
        const UpdateState split = RunUpdate(u, threads, offset, start, grad);
        EXPECT_TRUE(SameBits(split.var, one.var) && SameBits(split.slot1, one.slot1) &&
                    SameBits(split.slot2, one.slot2))
            << what << " threads=" << threads;
      }
    }
  }
  // 4 updates × 2 layouts × 2 thread counts × 2 steps, each split.
  EXPECT_EQ(IntraOpPool::Global().split_calls() - splits_before, 32u);
}

// The same two steps through ops::SgdOnHost / AdamOnHost on host arrays (how replicas that
// share their variables update them), with `threads` intra-op threads.
UpdateState RunUpdateOnHost(Update u, int threads, const UpdateState& start, const Values& grad) {
  ScopedIntraOpThreads budget(threads);
  UpdateState state = start;
  const int64_t n = static_cast<int64_t>(grad.size());
  for (int step = 1; step <= 2; ++step) {
    if (u == Update::kAdam) {
      const StatusOr<attrs::Adam> adam = ops::AdamAttrs(kLr, kBeta1, kBeta2, kEpsilon, step);
      TOWER_CHECK_OK(adam.status());
      ops::AdamOnHost(*adam, state.var.data(), state.slot1.data(), state.slot2.data(),
                      grad.data(), n);
      continue;
    }
    const StatusOr<attrs::Sgd> sgd = ops::SgdAttrs(
        kLr, u == Update::kSgd ? 0.0f : kMomentum, u == Update::kNesterov);
    TOWER_CHECK_OK(sgd.status());
    ops::SgdOnHost(*sgd, state.var.data(), u == Update::kSgd ? nullptr : state.slot1.data(),
                   grad.data(), n);
  }
  return state;
}

// One batch of every replica updates a whole shared variable on its caller: the update splits
// over the caller's threads as the ops do, with the ops' bits.
TEST(UpdateThreadsTest, HostArrayUpdatesSplitWithTheBitsOfTheOps) {
  UseThreeIntraOpThreads();
  const int64_t n = kUpdateRows * 3;
  UpdateState start{RandomValues(n, 41), RandomValues(n, 42), RandomValues(n, 43)};
  for (float& x : start.slot2) x = std::fabs(x);
  const Values grad = RandomValues(n, 44);
  for (Update u : {Update::kSgd, Update::kMomentum, Update::kNesterov, Update::kAdam}) {
    const UpdateState ops_bits = RunUpdate(u, 1, /*offset=*/false, start, grad);
    const uint64_t splits_before = IntraOpPool::Global().split_calls();
    for (int threads : {1, 2, 3}) {
      const UpdateState host = RunUpdateOnHost(u, threads, start, grad);
      EXPECT_TRUE(SameBits(host.var, ops_bits.var) && SameBits(host.slot1, ops_bits.slot1) &&
                  SameBits(host.slot2, ops_bits.slot2))
          << NameOf(u) << " threads=" << threads;
    }
    // 2 and 3 threads × 2 steps, each split.
    EXPECT_EQ(IntraOpPool::Global().split_calls() - splits_before, 4u) << NameOf(u);
  }
}

// ReluGrad and ReduceSum along the batch (a Dense layer's backward) split over the call's
// threads: against plain loops written here, and the bits of one thread for any count, on
// the mlp's [256, 1024] and on shapes whose split leaves an odd remainder.
TEST(BackwardThreadsTest, ReluGradAndBatchSumsSplitWithTheBitsOfOneThread) {
  UseThreeIntraOpThreads();
  struct Shape2 {
    int64_t rows, cols;
  };
  for (const Shape2& s : {Shape2{256, 1024}, Shape2{1000, 333}, Shape2{70001, 3}}) {
    const std::string what = std::to_string(s.rows) + "x" + std::to_string(s.cols);
    const Shape shape{s.rows, s.cols};
    const Values dy = RandomValues(s.rows * s.cols, 61);
    Values x = RandomValues(s.rows * s.cols, 62);
    x[0] = 0.0f;  // the boundary: no gradient at 0
    x[1] = -0.0f;
    Values relu_grad(dy.size());
    for (size_t i = 0; i < dy.size(); ++i) relu_grad[i] = x[i] > 0 ? dy[i] : 0.0f;
    std::vector<double> sums(static_cast<size_t>(s.cols), 0.0);
    for (int64_t i = 0; i < s.rows; ++i) {
      for (int64_t j = 0; j < s.cols; ++j) sums[j] += dy[i * s.cols + j];
    }
    Values column_sums(sums.begin(), sums.end());  // each rounded once to float
    const uint64_t splits_before = IntraOpPool::Global().split_calls();
    for (int threads : {1, 2, 3, 5}) {
      ScopedIntraOpThreads budget(threads);
      const Tensor tdy = *Tensor::FromHost(Cpu(), shape, dy);
      const Tensor tx = *Tensor::FromHost(Cpu(), shape, x);
      StatusOr<Tensor> grad = ops::ReluGrad(tdy, tx);
      ASSERT_TRUE(grad.ok()) << grad.status();
      EXPECT_TRUE(SameBits(*grad->ToHost(), relu_grad)) << what << " threads=" << threads;
      StatusOr<Tensor> sum = ops::ReduceSum(tdy, ops::ReduceAxis::kBatch);
      ASSERT_TRUE(sum.ok()) << sum.status();
      EXPECT_TRUE(SameBits(*sum->ToHost(), column_sums)) << what << " threads=" << threads;
    }
    // Both ops split with 2, 3 and 5 threads where each range gets 64K elements (the
    // 3-column shape's sums do not split: 16 columns at least per range).
    const uint64_t splits = IntraOpPool::Global().split_calls() - splits_before;
    EXPECT_EQ(splits, s.cols >= 32 ? 6u : 3u) << what;
  }
}

}  // namespace
}  // namespace tower
