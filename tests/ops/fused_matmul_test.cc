// ops::FusedMatMul on the CPU (ops/cpu/math_kernels.cc, the epilogue of ops/cpu/gemm.cc):
// the bits of MatMulByWeight, then BiasAdd, then Relu, on every path a product takes (Tower's
// GEMM loop with one and several depth blocks, column and row chunks over intra-op threads,
// the shared weight packing, Eigen's own product for vectors and tiny blocks, no depth), with
// NaN and infinities in the operands; its values against a double-precision formula written
// here; and its errors.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/config.h"
#include "device/context.h"
#include "device/intra_op.h"
#include "ops/array_ops.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/shared_packing.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "tests/testing/random_values.h"
#include "tests/testing/same_bits.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using Values = std::vector<float>;
using testing::SameBits;

constexpr double kEps = 1.1920929e-07;  // float32 machine epsilon
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Three intra-op threads for the process, before the runtime starts: the pool has two
// workers on any machine, so the splits really run on several threads.
void UseThreeIntraOpThreads() {
  Status status = config::SetIntraOpParallelismThreads(3);
  ASSERT_TRUE(status.ok()) << status;
}

Device* Cpu() { return *Context::Global().FindDevice("/CPU:0"); }

Tensor Host(const Shape& shape, const Values& values) {
  StatusOr<Tensor> t = Tensor::FromHost(Cpu(), shape, values);
  TOWER_CHECK_OK(t.status());
  return *t;
}

Values ToHost(const StatusOr<Tensor>& t) {
  TOWER_CHECK_OK(t.status());
  StatusOr<Values> host = t->ToHost();
  TOWER_CHECK_OK(host.status());
  return *host;
}

struct Case {
  int64_t m, k, n;
  const char* path;  // what it exercises
};

// x [m, k] · weight, m = 128 and 256 being the mlp workload's per-replica batches.
const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {128, 256, 1024, "the mlp's first layer: column chunks sharing the activations"},
      {128, 1024, 1024, "the mlp's second layer"},
      {131, 257, 1031, "column chunks with a leftover narrower than 48"},
      {1031, 257, 37, "row chunks"},
      {64, 3000, 200, "several depth blocks"},
      {5, 7, 3, "a tiny block: Eigen's coefficient-based product"},
      {1, 50, 30, "one row: Eigen's matrix-vector product"},
      {30, 50, 1, "one column"},
      {17, 0, 9, "no depth: the bias alone"},
      {0, 5, 7, "no rows"},
  };
  return cases;
}

struct Operands {
  Values x, weight, bias;
};

// Random values in [-1, 1), and where there is room: a NaN in x's first row and an infinity
// in its last, and a NaN, a -inf and a -0 in the bias.
Operands MakeOperands(const Case& c, uint32_t seed) {
  Operands o{testing::UniformValues(c.m * c.k, seed), testing::UniformValues(c.k * c.n, seed + 1),
             testing::UniformValues(c.n, seed + 2)};
  if (c.m >= 2 && c.k >= 1) {
    o.x[0] = kNaN;
    o.x[(c.m - 1) * c.k + c.k / 2] = kInf;
  }
  if (c.n >= 4) {
    o.bias[0] = kNaN;
    o.bias[1] = -kInf;
    o.bias[2] = -0.0f;
  }
  return o;
}

struct Fusion {
  bool bias;
  bool relu;
  std::string Name() const {
    return std::string(bias ? "bias" : "no bias") + (relu ? " + relu" : "");
  }
};
constexpr Fusion kFusions[] = {{true, true}, {true, false}, {false, true}, {false, false}};

Shape WeightShape(const Case& c, bool transpose_weight) {
  return transpose_weight ? Shape{c.n, c.k} : Shape{c.k, c.n};
}

// The weight as stored: [k, n], or its transpose [n, k].
Values StoredWeight(const Case& c, const Values& weight, bool transpose_weight) {
  if (!transpose_weight) return weight;
  Values t(weight.size());
  for (int64_t p = 0; p < c.k; ++p) {
    for (int64_t j = 0; j < c.n; ++j) t[j * c.k + p] = weight[p * c.n + j];
  }
  return t;
}

// A fresh weight version each call: the weight is packed anew, by the call itself.
uint64_t NextVersion() {
  static uint64_t version = uint64_t{1} << 40;
  return ++version;
}

// FusedMatMul, and the three ops it stands for, with `threads` intra-op threads.
struct Outputs {
  Values fused, separate;
};

Outputs RunBoth(const Case& c, const Operands& o, const Fusion& f, bool transpose_weight,
            uint64_t version, int threads) {
  ScopedIntraOpThreads budget(threads);
  const Tensor x = Host(Shape{c.m, c.k}, o.x);
  const Tensor w = Host(WeightShape(c, transpose_weight), StoredWeight(c, o.weight,
                                                                       transpose_weight));
  const Tensor bias = f.bias ? Host(Shape{c.n}, o.bias) : Tensor();
  Outputs run;
  run.fused = ToHost(ops::FusedMatMul(
      x, w, bias, f.relu ? ops::FusedActivation::kRelu : ops::FusedActivation::kNone,
      transpose_weight, version));
  StatusOr<Tensor> z = ops::MatMulByWeight(x, w, transpose_weight, version);
  if (f.bias && z.ok()) z = ops::BiasAdd(*z, bias);
  if (f.relu && z.ok()) z = ops::Relu(*z);
  run.separate = ToHost(z);
  return run;
}

// Σ_p x[i, p]·w[p, j] in double, and Σ_p |x[i, p]·w[p, j]| for the bound.
struct Formula {
  std::vector<double> sum, magnitude;
};

Formula ProductInDouble(const Case& c, const Operands& o) {
  Formula f{std::vector<double>(static_cast<size_t>(c.m * c.n)),
            std::vector<double>(static_cast<size_t>(c.m * c.n))};
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double term = static_cast<double>(o.x[i * c.k + p]) * o.weight[p * c.n + j];
        sum += term;
        magnitude += std::fabs(term);
      }
      f.sum[i * c.n + j] = sum;
      f.magnitude[i * c.n + j] = magnitude;
    }
  }
  return f;
}

// Checks `got` against f(Σ x·w + bias) in double: NaN where that is NaN, the same infinity,
// else within 2·(k + 1)·ε of the sum of the terms' magnitudes (written so that a NaN fails).
void ExpectNearFormula(const Case& c, const Operands& o, const Formula& product,
                       const Fusion& f, const Values& got, const std::string& what) {
  ASSERT_EQ(got.size(), static_cast<size_t>(c.m * c.n)) << what;
  int failures = 0;
  for (int64_t i = 0; i < c.m && failures < 5; ++i) {
    for (int64_t j = 0; j < c.n && failures < 5; ++j) {
      double sum = product.sum[i * c.n + j];
      double magnitude = product.magnitude[i * c.n + j];
      if (f.bias) {
        sum += o.bias[j];
        magnitude += std::fabs(o.bias[j]);
      }
      if (f.relu && !(sum > 0) && !std::isnan(sum)) sum = 0;
      const float value = got[i * c.n + j];
      bool ok;
      if (std::isnan(sum)) {
        ok = std::isnan(value);
      } else if (std::isinf(sum)) {
        ok = value == sum;
      } else {
        const double bound = 2.0 * static_cast<double>(c.k + 1) * kEps * magnitude + 1e-30;
        ok = std::fabs(value - sum) <= bound;
      }
      if (!ok) {
        ++failures;
        ADD_FAILURE() << what << ": element (" << i << ", " << j << ") is " << value
                      << ", the formula gives " << sum;
      }
    }
  }
}

std::string Describe(const Case& c, const Fusion& f, bool transpose_weight, uint64_t version,
                     int threads) {
  return std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n) + " (" +
         c.path + "), " + f.Name() + (transpose_weight ? ", weight transposed" : "") +
         (version != 0 ? ", shared packing" : "") + ", threads=" + std::to_string(threads);
}

TEST(FusedMatMulTest, TheBitsOfMatMulBiasAddAndRelu) {
  UseThreeIntraOpThreads();
  const uint64_t splits_before = IntraOpPool::Global().split_calls();
  const cpu::SharedPackingCounts packing_before = cpu::SharedPackingCountsSoFar();
  uint32_t seed = 1;
  for (const Case& c : Cases()) {
    const Operands o = MakeOperands(c, seed += 3);
    const Formula product = ProductInDouble(c, o);
    for (const Fusion& f : kFusions) {
      for (bool transpose_weight : {false, true}) {
        for (int threads : {1, 2, 3}) {
          for (bool shared : {false, true}) {
            const uint64_t version = shared ? NextVersion() : 0;
            const std::string what = Describe(c, f, transpose_weight, version, threads);
            const Outputs run = RunBoth(c, o, f, transpose_weight, version, threads);
            EXPECT_TRUE(SameBits(run.fused, run.separate)) << what;
            ExpectNearFormula(c, o, product, f, run.fused, what);
          }
        }
      }
    }
  }
  // The paths the cases are there for were taken (the comparisons alone would pass without).
  EXPECT_GT(cpu::EigenBlockSizes(64, 3000, 200).kc, 0);
  EXPECT_LT(cpu::EigenBlockSizes(64, 3000, 200).kc, 3000) << "64x3000x200 has one depth block";
  EXPECT_GT(IntraOpPool::Global().split_calls(), splits_before);
  const cpu::SharedPackingCounts packing_after = cpu::SharedPackingCountsSoFar();
  EXPECT_GT(packing_after.packed, packing_before.packed);
  EXPECT_GT(packing_after.reused, packing_before.reused);
}

// Any intra-op thread count gives the bits of one thread, as MatMul's does.
TEST(FusedMatMulTest, AnyThreadCountGivesTheBitsOfOneThread) {
  UseThreeIntraOpThreads();
  uint32_t seed = 500;
  for (const Case& c : Cases()) {
    const Operands o = MakeOperands(c, seed += 3);
    const Fusion f{true, true};
    const Values one = RunBoth(c, o, f, false, 0, 1).fused;
    for (int threads : {2, 3, 5}) {
      EXPECT_TRUE(SameBits(RunBoth(c, o, f, false, 0, threads).fused, one))
          << Describe(c, f, false, 0, threads);
    }
  }
}

TEST(FusedMatMulTest, BadOperandsAreRefusedByName) {
  const Tensor x = Host(Shape{2, 3}, Values(6, 1.0f));
  const Tensor w = Host(Shape{3, 4}, Values(12, 1.0f));
  const auto relu = ops::FusedActivation::kRelu;
  Status wrong_bias = ops::FusedMatMul(x, w, Host(Shape{3}, Values(3, 0.0f)), relu).status();
  EXPECT_TRUE(IsInvalidArgument(wrong_bias)) << wrong_bias;
  EXPECT_THAT(wrong_bias.message(), HasSubstr("FusedMatMul: the bias size must equal"));
  Status matrix_bias =
      ops::FusedMatMul(x, w, Host(Shape{1, 4}, Values(4, 0.0f)), relu).status();
  EXPECT_THAT(matrix_bias.message(), HasSubstr("FusedMatMul: bias must have rank 1"));
  Status inner = ops::FusedMatMul(x, w, Tensor(), relu, /*transpose_weight=*/true).status();
  EXPECT_THAT(inner.message(), HasSubstr("FusedMatMul: inner dimensions differ"));
  StatusOr<Tensor> half = ops::Cast(x, DType::kBFloat16);
  ASSERT_TRUE(half.ok()) << half.status();
  Status not_float32 = ops::FusedMatMul(*half, w, Tensor(), relu).status();
  EXPECT_THAT(not_float32.message(), HasSubstr("FusedMatMul"));
  EXPECT_THAT(not_float32.message(), HasSubstr("float32"));
}

}  // namespace
}  // namespace tower
