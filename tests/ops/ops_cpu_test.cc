// Every op's CPU kernel against the plain reference (ops/reference), on odd shapes, an
// empty batch and large values. Tolerances are stated per op; floating-point error bounds
// follow the usual forms (k·ε·|A|·|B| for a product of inner size k).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "device/context.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/reference/reference_ops.h"
#include "ops/training_ops.h"
#include "tests/testing/same_bits.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using Values = std::vector<float>;

constexpr float kEps = 1.1920929e-07f;  // float32 machine epsilon

Device* Cpu() { return *Context::Global().FindDevice("/CPU:0"); }

Values RandomValues(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  Values v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor Make(const Shape& shape, const Values& values) {
  StatusOr<Tensor> t = Tensor::FromHost(Cpu(), shape, values);
  TOWER_CHECK_OK(t.status());
  return *t;
}

Values Host(const StatusOr<Tensor>& t) {
  TOWER_CHECK_OK(t.status());
  return *t->ToHost();
}

// |got − want| <= bound (per element) for every element; reports the worst one. A NaN or
// Inf where the reference is finite always fails (the comparison is written so that NaN
// cannot pass it); a NaN reference wants a NaN, an infinite one the same infinity.
void ExpectWithin(const Values& got, const Values& want, const Values& bound,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  bool failed = false;
  double worst = 0;
  size_t worst_index = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
      continue;
    }
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " at " << i;
      continue;
    }
    const double error = std::fabs(double{got[i]} - want[i]);
    if (error <= bound[i]) continue;
    // NaN or Inf in `got` ranks above every finite excess.
    const double excess = std::isfinite(error) ? error - bound[i]
                                               : std::numeric_limits<double>::infinity();
    if (!failed || excess > worst) {
      worst = excess;
      worst_index = i;
    }
    failed = true;
  }
  EXPECT_FALSE(failed) << what << ": element " << worst_index << " is " << got[worst_index]
                       << ", reference " << want[worst_index] << ", allowed error "
                       << bound[worst_index];
}

// Relative tolerance: bound = tol · max(1, |want|).
void ExpectClose(const Values& got, const Values& want, float tol, const std::string& what) {
  Values bound(want.size());
  for (size_t i = 0; i < want.size(); ++i) bound[i] = tol * std::max(1.0f, std::fabs(want[i]));
  ExpectWithin(got, want, bound, what);
}

Values Abs(Values v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

struct Case {
  int64_t rows;
  int64_t cols;
  float scale;  // inputs uniform in [−scale, scale]
};

std::string Name(const Case& c) {
  return "[" + std::to_string(c.rows) + ", " + std::to_string(c.cols) + "] x" +
         std::to_string(static_cast<int>(c.scale));
}

// Odd shapes, a single element, an empty batch, and large values.
const Case kCases[] = {{1, 1, 1}, {7, 13, 1}, {33, 65, 2}, {257, 129, 1},
                       {0, 5, 1}, {5, 0, 1},  {16, 16, 1000}};

// The helper itself: a NaN or Inf result never passes against a finite reference.
TEST(OpsCpuTest, TheComparisonFailsOnNaNAndInf) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_NONFATAL_FAILURE((ExpectClose({1, nan}, {1, 2}, 1e-3f, "nan")), "element 1 is nan");
  EXPECT_NONFATAL_FAILURE((ExpectClose({inf, 2}, {1, 2}, 1e-3f, "inf")), "element 0 is inf");
  EXPECT_NONFATAL_FAILURE((ExpectClose({1, 2.5f}, {1, 2}, 1e-3f, "far")), "element 1 is 2.5");
  EXPECT_NONFATAL_FAILURE((ExpectClose({1}, {nan}, 1e-3f, "want nan")), "want nan at 0");
  ExpectClose({1, 2.0001f, nan, inf}, {1, 2, nan, inf}, 1e-3f, "within");
}

// MatMul, and MatMulAddInto over the same operands.
TEST(OpsCpuTest, MatMulAllTransposes) {
  for (const Case& c : kCases) {
    const int64_t m = c.rows, k = c.cols, n = 11;
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        const Shape a_shape = ta ? Shape{k, m} : Shape{m, k};
        const Shape b_shape = tb ? Shape{n, k} : Shape{k, n};
        const Values a = RandomValues(m * k, c.scale, 1);
        const Values b = RandomValues(k * n, c.scale, 2);
        const std::string what = Name(c) + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
        const Values got = Host(ops::MatMul(Make(a_shape, a), Make(b_shape, b), ta, tb));
        const Values want = reference::MatMul(a, a_shape, b, b_shape, ta, tb);
        // Error bound of a float dot product of length k: k·ε·Σ|a||b| (plus headroom).
        const Values magnitude = reference::MatMul(Abs(a), a_shape, Abs(b), b_shape, ta, tb);
        Values bound = magnitude;
        for (float& x : bound) x *= 2 * (k + 1) * kEps;
        ExpectWithin(got, want, bound, "MatMul " + what);
        // MatMulAddInto: the product added into a sum in place, against the reference product
        // plus the sum's old values; for depths within one of Eigen's blocks (all of these),
        // bitwise MatMul then Add (one rounding each).
        const Values before = RandomValues(m * n, c.scale * c.scale, 3);
        Tensor sum = Make(Shape{m, n}, before);
        ASSERT_TRUE(ops::MatMulAddInto(Make(a_shape, a), Make(b_shape, b), ta, tb, sum).ok());
        const Values added = *sum.ToHost();
        Values want_added = want;
        Values bound_added = magnitude;
        for (size_t i = 0; i < want.size(); ++i) {
          want_added[i] += before[i];
          bound_added[i] = (bound_added[i] + std::fabs(before[i])) * 2 * (k + 2) * kEps;
        }
        ExpectWithin(added, want_added, bound_added, "MatMulAddInto " + what);
        EXPECT_EQ(added, Host(ops::Add(Make(Shape{m, n}, before), *ops::MatMul(Make(a_shape, a),
                                                                              Make(b_shape, b),
                                                                              ta, tb))))
            << "MatMulAddInto " << what;
      }
    }
  }
}

TEST(OpsCpuTest, MatMulAddIntoRefusesShapesAndTypesThatDoNotFit) {
  const Tensor a = Make(Shape{2, 3}, Values(6, 1.0f));
  const Tensor b = Make(Shape{3, 4}, Values(12, 1.0f));
  Tensor wrong = Make(Shape{2, 5}, Values(10, 0.0f));
  const Status shape = ops::MatMulAddInto(a, b, false, false, wrong);
  EXPECT_TRUE(IsInvalidArgument(shape)) << shape;
  EXPECT_THAT(shape.message(), HasSubstr("give [2, 4], not the sum's shape [2, 5]"));
  EXPECT_EQ(*wrong.ToHost(), Values(10, 0.0f));  // nothing written
  Tensor half = *ops::Cast(Make(Shape{2, 4}, Values(8, 0.0f)), DType::kBFloat16);
  EXPECT_FALSE(ops::MatMulAddInto(a, b, false, false, half).ok());
  Tensor none;
  EXPECT_FALSE(ops::MatMulAddInto(a, b, false, false, none).ok());
}

TEST(OpsCpuTest, MatMulOfTensorFlowsPlacementGuide) {
  const Values got = Host(ops::MatMul(Make(Shape{2, 3}, {1, 2, 3, 4, 5, 6}),
                                      Make(Shape{3, 2}, {1, 2, 3, 4, 5, 6})));
  EXPECT_EQ(got, (Values{22, 28, 49, 64}));
}

TEST(OpsCpuTest, ElementwiseBinaryOps) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values a = RandomValues(shape.num_elements(), c.scale, 3);
    const Values b = RandomValues(shape.num_elements(), c.scale, 4);
    const Tensor ta = Make(shape, a), tb = Make(shape, b);
    // One rounding each: exact against the double reference rounded once.
    ExpectClose(Host(ops::Add(ta, tb)), reference::Add(a, b), 0, "Add " + Name(c));
    ExpectClose(Host(ops::Sub(ta, tb)), reference::Sub(a, b), 0, "Sub " + Name(c));
    ExpectClose(Host(ops::Mul(ta, tb)), reference::Mul(a, b), 0, "Mul " + Name(c));
    ExpectClose(Host(ops::Scale(ta, -1.5f)), reference::Scale(a, -1.5f), 0, "Scale " + Name(c));
    // Two roundings (product, sum): within 2ε of the larger operand.
    Values bound(a.size());
    for (size_t i = 0; i < a.size(); ++i) bound[i] = 2 * kEps * (0.5f * std::fabs(a[i]) + std::fabs(b[i]));
    ExpectWithin(Host(ops::Axpy(0.5f, ta, tb)), reference::Axpy(0.5f, a, b), bound, "Axpy " + Name(c));
  }
}

TEST(OpsCpuTest, ClipByValueClampsEachElementAndKeepsNaN) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values a = RandomValues(shape.num_elements(), c.scale, 5);
    const float bound = 0.25f * c.scale;
    ExpectClose(Host(ops::ClipByValue(Make(shape, a), -bound, bound)),
                reference::ClipByValue(a, -bound, bound), 0, "ClipByValue " + Name(c));
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Values got = Host(ops::ClipByValue(Make(Shape{5}, {-3, -1, 0.5f, inf, nan}), -1, 2));
  EXPECT_EQ(got[0], -1);
  EXPECT_EQ(got[1], -1);
  EXPECT_EQ(got[2], 0.5f);
  EXPECT_EQ(got[3], 2);
  EXPECT_TRUE(std::isnan(got[4])) << "a NaN must survive clipping, got " << got[4];
  // The host entry point is the kernel's arithmetic, in place too.
  Values in_place = {-3, -1, 0.5f, inf, nan};
  ops::ClipByValueOnHost(attrs::ClipByValue{-1, 2}, in_place.data(), in_place.data(), 5);
  EXPECT_EQ(std::memcmp(in_place.data(), got.data(), sizeof(float) * 5), 0);
  EXPECT_THAT(ops::ClipByValue(Make(Shape{1}, {0}), 1, -1).status().message(),
              HasSubstr("needs min <= max"));
  EXPECT_THAT(ops::ClipByValue(Make(Shape{1}, {0}), nan, 1).status().message(),
              HasSubstr("needs min <= max"));
}

TEST(OpsCpuTest, BiasAdd) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values x = RandomValues(shape.num_elements(), c.scale, 5);
    const Values bias = RandomValues(c.cols, c.scale, 6);
    ExpectClose(Host(ops::BiasAdd(Make(shape, x), Make(Shape{c.cols}, bias))),
                reference::BiasAdd(x, shape, bias), 0, "BiasAdd " + Name(c));
  }
}

TEST(OpsCpuTest, AddN) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    std::vector<Values> values;
    std::vector<Tensor> tensors;
    for (int i = 0; i < 5; ++i) {
      values.push_back(RandomValues(shape.num_elements(), c.scale, 10 + i));
      tensors.push_back(Make(shape, values.back()));
    }
    Values bound(static_cast<size_t>(shape.num_elements()));
    for (size_t j = 0; j < bound.size(); ++j) {
      for (const Values& v : values) bound[j] += 5 * kEps * std::fabs(v[j]);
    }
    ExpectWithin(Host(ops::AddN(tensors)), reference::AddN(values), bound, "AddN " + Name(c));
  }
  EXPECT_EQ(Host(ops::AddN({Make(Shape{2}, {1, 2})})), (Values{1, 2}));
}

TEST(OpsCpuTest, Reductions) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values x = RandomValues(shape.num_elements(), c.scale, 7);
    const Tensor t = Make(shape, x);
    // Accumulated in double: only the final rounding remains.
    for (auto axis : {ops::ReduceAxis::kAll, ops::ReduceAxis::kBatch}) {
      const std::string tag = Name(c) + (axis == ops::ReduceAxis::kAll ? " all" : " batch");
      StatusOr<Tensor> sum = ops::ReduceSum(t, axis);
      ASSERT_TRUE(sum.ok());
      EXPECT_EQ(sum->shape(), axis == ops::ReduceAxis::kAll ? Shape() : Shape{c.cols}) << tag;
      ExpectClose(Host(sum), reference::ReduceSum(x, shape, axis), 2 * kEps, "ReduceSum " + tag);
      ExpectClose(Host(ops::ReduceMean(t, axis)), reference::ReduceMean(x, shape, axis),
                  2 * kEps, "ReduceMean " + tag);
    }
  }
  // Mean of nothing is NaN; sum of nothing is zero.
  const Tensor empty = Make(Shape{0, 3}, {});
  EXPECT_TRUE(std::isnan(Host(ops::ReduceMean(empty))[0]));
  EXPECT_EQ(Host(ops::ReduceSum(empty, ops::ReduceAxis::kBatch)), (Values{0, 0, 0}));
  // Rank 1 along the batch gives a scalar.
  EXPECT_EQ(Host(ops::ReduceSum(Make(Shape{3}, {1, 2, 3}), ops::ReduceAxis::kBatch)), Values{6});
}

TEST(OpsCpuTest, Activations) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values x = RandomValues(shape.num_elements(), c.scale * 4, 8);
    const Values dy = RandomValues(shape.num_elements(), 1, 9);
    const Tensor tx = Make(shape, x), tdy = Make(shape, dy);
    ExpectClose(Host(ops::Relu(tx)), reference::Relu(x), 0, "Relu " + Name(c));
    ExpectClose(Host(ops::ReluGrad(tdy, tx)), reference::ReluGrad(dy, x), 0, "ReluGrad " + Name(c));
    // Eigen's vectorised logistic and tanh: a few ulps of the result in [−1, 1].
    const Values s = Host(ops::Sigmoid(tx));
    ExpectClose(s, reference::Sigmoid(x), 4 * kEps, "Sigmoid " + Name(c));
    ExpectClose(Host(ops::SigmoidGrad(tdy, Make(shape, s))), reference::SigmoidGrad(dy, s),
                4 * kEps, "SigmoidGrad " + Name(c));
    const Values th = Host(ops::Tanh(tx));
    ExpectClose(th, reference::Tanh(x), 4 * kEps, "Tanh " + Name(c));
    ExpectClose(Host(ops::TanhGrad(tdy, Make(shape, th))), reference::TanhGrad(dy, th),
                4 * kEps, "TanhGrad " + Name(c));
  }
}

TEST(OpsCpuTest, SoftmaxIsStableForLargeLogits) {
  for (const Case& c : kCases) {
    if (c.cols == 0) continue;
    const Shape shape{c.rows, c.cols};
    const Values x = RandomValues(shape.num_elements(), c.scale * 10, 11);
    const Values got = Host(ops::Softmax(Make(shape, x)));
    ExpectClose(got, reference::Softmax(x, shape), 8 * kEps, "Softmax " + Name(c));
    for (float p : got) ASSERT_TRUE(std::isfinite(p));
    const Values dy = RandomValues(shape.num_elements(), 1, 12);
    ExpectClose(Host(ops::SoftmaxGrad(Make(shape, dy), Make(shape, got))),
                reference::SoftmaxGrad(dy, got, shape), 8 * kEps, "SoftmaxGrad " + Name(c));
  }
}

TEST(OpsCpuTest, MeanSquaredErrorAndGrad) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values p = RandomValues(shape.num_elements(), c.scale, 12);
    const Values t = RandomValues(shape.num_elements(), c.scale, 13);
    const int64_t global = c.rows + 3;  // a replica's shard of a larger global batch
    const float scale = 1.0f / (static_cast<float>(global) * std::max<int64_t>(c.cols, 1));
    const Tensor tp = Make(shape, p), tt = Make(shape, t);
    ExpectClose(Host(ops::MeanSquaredError(tp, tt, global)),
                reference::MeanSquaredError(p, t, scale), 4 * kEps, "MSE " + Name(c));
    ExpectClose(Host(ops::MeanSquaredErrorGrad(tp, tt, global)),
                reference::MeanSquaredErrorGrad(p, t, scale), 4 * kEps, "MSE grad " + Name(c));
  }
  // Keras's value on a tiny example: mean over features, then over the batch.
  const Tensor pred = Make(Shape{2, 2}, {1, 2, 3, 4});
  const Tensor target = Make(Shape{2, 2}, {1, 0, 0, 4});
  EXPECT_FLOAT_EQ(Host(ops::MeanSquaredError(pred, target))[0], (4.0f / 2 + 9.0f / 2) / 2);
}

TEST(OpsCpuTest, SparseSoftmaxCrossEntropyAndGrad) {
  for (const Case& c : kCases) {
    if (c.cols == 0) continue;
    const Shape shape{c.rows, c.cols};
    const Values logits = RandomValues(shape.num_elements(), c.scale * 5, 14);
    std::vector<int32_t> labels(static_cast<size_t>(c.rows));
    for (int64_t i = 0; i < c.rows; ++i) labels[i] = static_cast<int32_t>((i * 7) % c.cols);
    const int64_t global = c.rows + 1;
    const float scale = 1.0f / static_cast<float>(global);
    const Tensor tl = Make(shape, logits);
    const Tensor ty = *Tensor::FromHostInt32(Cpu(), Shape{c.rows}, labels);
    ExpectClose(Host(ops::SparseSoftmaxCrossEntropy(tl, ty, global)),
                reference::SparseSoftmaxCrossEntropy(logits, shape, labels, scale), 16 * kEps,
                "CE " + Name(c));
    ExpectClose(Host(ops::SparseSoftmaxCrossEntropyGrad(tl, ty, global)),
                reference::SparseSoftmaxCrossEntropyGrad(logits, shape, labels, scale), 8 * kEps,
                "CE grad " + Name(c));
  }
}

TEST(OpsCpuTest, CrossEntropyRejectsLabelsOutOfRange) {
  const Tensor logits = Make(Shape{3, 4}, RandomValues(12, 1, 15));
  const Tensor labels = *Tensor::FromHostInt32(Cpu(), Shape{3}, std::vector<int32_t>{0, 4, 1});
  StatusOr<Tensor> loss = ops::SparseSoftmaxCrossEntropy(logits, labels);
  EXPECT_TRUE(IsInvalidArgument(loss.status()));
  EXPECT_THAT(loss.status().message(), HasSubstr("label 4 at row 1 is outside [0, 4)"));
  EXPECT_THAT(loss.status().message(), HasSubstr("SparseSoftmaxCrossEntropy on /job:localhost"));
  const Tensor negative = *Tensor::FromHostInt32(Cpu(), Shape{3}, std::vector<int32_t>{0, 1, -1});
  EXPECT_THAT(ops::SparseSoftmaxCrossEntropyGrad(logits, negative).status().message(),
              HasSubstr("label -1 at row 2"));
}

TEST(OpsCpuTest, FillConcatSplit) {
  EXPECT_EQ(Host(ops::Fill(Shape{2, 3}, 2.5f, Cpu())), Values(6, 2.5f));
  EXPECT_EQ(Host(ops::Zeros(Shape{0, 3}, Cpu())), Values{});
  const Values a = RandomValues(6, 1, 16), b = RandomValues(9, 1, 17);
  StatusOr<Tensor> joined = ops::Concat({Make(Shape{2, 3}, a), Make(Shape{0, 3}, {}), Make(Shape{3, 3}, b)});
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->shape(), (Shape{5, 3}));
  EXPECT_EQ(Host(joined), reference::Concat({a, b}));
  StatusOr<std::vector<Tensor>> pieces = ops::Split(*joined, {2, 0, 3});
  ASSERT_TRUE(pieces.ok());
  EXPECT_EQ(Host((*pieces)[0]), a);
  EXPECT_EQ((*pieces)[1].shape(), (Shape{0, 3}));
  EXPECT_EQ(Host((*pieces)[2]), b);
  EXPECT_TRUE((*pieces)[2].SharesBufferWith(*joined));  // views, not copies
  EXPECT_EQ(ops::EvenSplitSizes(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(ops::EvenSplitSizes(2, 4), (std::vector<int64_t>{1, 1, 0, 0}));
  StatusOr<std::vector<Tensor>> even = ops::SplitEvenly(*joined, 2);
  ASSERT_TRUE(even.ok());
  EXPECT_EQ((*even)[0].shape(), (Shape{3, 3}));
  EXPECT_EQ((*even)[1].shape(), (Shape{2, 3}));
}

TEST(OpsCpuTest, CastBetweenAllTypes) {
  const Values x = {0.0f, -1.5f, 3.14159f, 65504.0f, 70000.0f, -2.5e-8f, 1e10f, NAN, -3e9f, 0.1f};
  const Tensor t = Make(Shape{10}, x);
  for (DType to : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt32}) {
    StatusOr<Tensor> cast = ops::Cast(t, to);
    ASSERT_TRUE(cast.ok()) << cast.status();
    EXPECT_EQ(cast->dtype(), to);
    const Values back = Host(ops::Cast(*cast, DType::kFloat32));
    const Values want = reference::CastRoundTrip(x, to);
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(back[i]));
      } else {
        EXPECT_EQ(back[i], want[i]) << DTypeName(to) << " element " << i;
      }
    }
  }
  // Known answers, bit for bit (IEEE 754 binary16; bfloat16 = float32's top half, rounded
  // to nearest even): what the stored values are, not only what they read back as.
  struct Bits {
    float x;
    uint16_t f16;
    uint16_t bf16;
  };
  const Bits table[] = {
      {0.0f, 0x0000, 0x0000},        {-0.0f, 0x8000, 0x8000},
      {1.0f, 0x3C00, 0x3F80},        {-2.0f, 0xC000, 0xC000},
      {0.1f, 0x2E66, 0x3DCD},        {65504.0f, 0x7BFF, 0x4780},
      {65520.0f, 0x7C00, 0x4780},    {5.9604645e-8f, 0x0001, 0x3380},
      {2.9802322e-8f, 0x0000, 0x3300}, {2049.0f, 0x6800, 0x4500},
      {2051.0f, 0x6802, 0x4500},     {1.00390625f, 0x3C04, 0x3F80},
      {1.01171875f, 0x3C0C, 0x3F82}, {INFINITY, 0x7C00, 0x7F80},
      {-INFINITY, 0xFC00, 0xFF80},   {3.4028235e38f, 0x7C00, 0x7F80},
  };
  for (const Bits& b : table) {
    EXPECT_EQ(FloatToFloat16(b.x), b.f16) << b.x;
    EXPECT_EQ(FloatToBFloat16(b.x), b.bf16) << b.x;
  }
  EXPECT_EQ(FloatToFloat16(NAN) & 0x7C00, 0x7C00);  // a NaN stays a NaN
  EXPECT_NE(FloatToFloat16(NAN) & 0x03FF, 0);
  EXPECT_EQ(FloatToBFloat16(NAN) & 0x7F80, 0x7F80);
  EXPECT_NE(FloatToBFloat16(NAN) & 0x007F, 0);
  // Spot values: float16 max and overflow, bfloat16 rounding, int saturation.
  const Values f16 = Host(ops::Cast(*ops::Cast(t, DType::kFloat16), DType::kFloat32));
  EXPECT_EQ(f16[3], 65504.0f);
  EXPECT_TRUE(std::isinf(f16[4]));
  const std::vector<int32_t> ints = *ops::Cast(t, DType::kInt32)->ToHostInt32();
  EXPECT_EQ(ints[1], -1);
  EXPECT_EQ(ints[2], 3);
  EXPECT_EQ(ints[6], 2147483647);
  EXPECT_EQ(ints[7], 0);
  EXPECT_EQ(ints[8], -2147483647 - 1);
}

TEST(OpsCpuTest, Float16ConversionIsExactOnEveryHalf) {
  // Every finite half converts to float and back to itself.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    if ((h & 0x7c00) == 0x7c00) continue;  // inf/nan
    ASSERT_EQ(FloatToFloat16(Float16ToFloat(h)), h) << std::hex << bits;
  }
  // Ties round to even: 2049 lies halfway between the halves 2048 and 2050.
  EXPECT_EQ(Float16ToFloat(FloatToFloat16(2049.0f)), 2048.0f);
  EXPECT_EQ(Float16ToFloat(FloatToFloat16(2051.0f)), 2052.0f);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.00390625f)), 1.0f);  // tie to even
}

TEST(OpsCpuTest, SgdUpdates) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values w = RandomValues(shape.num_elements(), c.scale, 18);
    const Values g = RandomValues(shape.num_elements(), c.scale, 19);
    for (float momentum : {0.0f, 0.9f}) {
      for (bool nesterov : {false, true}) {
        Tensor var = Make(shape, w);
        Tensor velocity = Make(shape, Values(w.size(), 0.0f));
        const Tensor grad = Make(shape, g);
        Values want_w = w, want_v(w.size(), 0.0f);
        const attrs::Sgd sgd{0.1f, momentum, nesterov};
        for (int step = 0; step < 3; ++step) {
          ASSERT_TRUE(ops::ApplySgdMomentum(var, velocity, grad, 0.1f, momentum, nesterov).ok());
          reference::ApplySgd(&want_w, &want_v, g, sgd);
        }
        const std::string tag = Name(c) + " momentum " + std::to_string(momentum) +
                                (nesterov ? " nesterov" : "");
        // A few roundings of values as large as the weight and the gradient (the result may
        // be much smaller than either: cancellation).
        Values bound(w.size());
        for (size_t i = 0; i < w.size(); ++i) {
          bound[i] = 16 * kEps * (std::fabs(w[i]) + std::fabs(g[i]));
        }
        ExpectWithin(Host(var), want_w, bound, "SGD var " + tag);
        ExpectWithin(Host(velocity), want_v, bound, "SGD velocity " + tag);
      }
    }
    Tensor var = Make(shape, w);
    ASSERT_TRUE(ops::ApplySgd(var, Make(shape, g), 0.25f).ok());
    Values want = w;
    reference::ApplySgd(&want, nullptr, g, attrs::Sgd{0.25f, 0, false});
    ExpectClose(Host(var), want, 2 * kEps, "plain SGD " + Name(c));
  }
}

TEST(OpsCpuTest, AdamUpdates) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values w = RandomValues(shape.num_elements(), c.scale, 30);
    Tensor var = Make(shape, w);
    Tensor m = Make(shape, Values(w.size(), 0.0f));
    Tensor v = Make(shape, Values(w.size(), 0.0f));
    Values want_w = w, want_m(w.size(), 0.0f), want_v(w.size(), 0.0f);
    for (int step = 1; step <= 4; ++step) {
      const Values g = RandomValues(shape.num_elements(), c.scale, 30 + step);
      ASSERT_TRUE(ops::ApplyAdam(var, m, v, Make(shape, g), 0.01f, 0.9f, 0.999f, 1e-7f, step).ok());
      const double alpha = 0.01 * std::sqrt(1 - std::pow(0.999, step)) / (1 - std::pow(0.9, step));
      reference::ApplyAdam(&want_w, &want_m, &want_v, g,
                           attrs::Adam{static_cast<float>(alpha), 0.9f, 0.999f, 1e-7f});
    }
    // Each step moves a weight by about alpha: errors relative to the weight and to alpha.
    Values bound(w.size());
    for (size_t i = 0; i < w.size(); ++i) bound[i] = 16 * kEps * std::fabs(w[i]) + 1e-5f * 0.04f;
    ExpectWithin(Host(var), want_w, bound, "Adam var " + Name(c));
    // The moments mix gradients of size `scale` (and scale²): cancellation can leave them
    // much smaller than their terms, so the bounds are relative to the terms.
    ExpectWithin(Host(m), want_m, Values(w.size(), 16 * kEps * c.scale), "Adam m " + Name(c));
    ExpectWithin(Host(v), want_v, Values(w.size(), 16 * kEps * c.scale * c.scale),
                 "Adam v " + Name(c));
  }
  Tensor var = Make(Shape{2}, {0, 0});
  Tensor m = Make(Shape{2}, {0, 0});
  Tensor v = Make(Shape{2}, {0, 0});
  const Tensor g = Make(Shape{2}, {1, -1});
  EXPECT_THAT(ops::ApplyAdam(var, m, v, g, 0.1f, 1.0f, 0.999f, 1e-7f, 1).message(),
              HasSubstr("need beta1, beta2 in [0, 1)"));
  EXPECT_THAT(ops::ApplyAdam(var, m, v, g, 0.1f, 0.9f, 0.999f, 1e-7f, 0).message(),
              HasSubstr("step 0"));
  // First step of Adam moves each weight by lr against the sign of its gradient.
  ASSERT_TRUE(ops::ApplyAdam(var, m, v, g, 0.1f, 0.9f, 0.999f, 1e-7f, 1).ok());
  const Values first = Host(StatusOr<Tensor>(var));
  EXPECT_NEAR(first[0], -0.1f, 1e-6);
  EXPECT_NEAR(first[1], 0.1f, 1e-6);
}

TEST(OpsCpuTest, AdamWDecaysEachWeightByTheRateTimesTheDecayBeforeTheAdamStep) {
  constexpr float kLr = 0.01f, kWeightDecay = 0.5f;
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values w = RandomValues(shape.num_elements(), c.scale, 40);
    Tensor var = Make(shape, w);
    Tensor m = Make(shape, Values(w.size(), 0.0f));
    Tensor v = Make(shape, Values(w.size(), 0.0f));
    Values want_w = w, want_m(w.size(), 0.0f), want_v(w.size(), 0.0f);
    for (int step = 1; step <= 4; ++step) {
      const Values g = RandomValues(shape.num_elements(), c.scale, 40 + step);
      ASSERT_TRUE(ops::ApplyAdam(var, m, v, Make(shape, g), kLr, 0.9f, 0.999f, 1e-7f, step,
                                 kWeightDecay)
                      .ok());
      const double alpha = 0.01 * std::sqrt(1 - std::pow(0.999, step)) / (1 - std::pow(0.9, step));
      reference::ApplyAdam(&want_w, &want_m, &want_v, g,
                           attrs::Adam{static_cast<float>(alpha), 0.9f, 0.999f, 1e-7f,
                                       static_cast<float>(0.01 * 0.5)});
    }
    Values bound(w.size());
    for (size_t i = 0; i < w.size(); ++i) bound[i] = 16 * kEps * std::fabs(w[i]) + 1e-5f * 0.04f;
    ExpectWithin(Host(var), want_w, bound, "AdamW var " + Name(c));
  }
  // Closed form: a zero gradient leaves m = v = 0, so only the decay moves the weight:
  // w · (1 − lr · weight_decay) = 2 · (1 − 0.005) = 1.99.
  Tensor var = Make(Shape{2}, {2, -4});
  Tensor m = Make(Shape{2}, {0, 0});
  Tensor v = Make(Shape{2}, {0, 0});
  ASSERT_TRUE(ops::ApplyAdam(var, m, v, Make(Shape{2}, {0, 0}), kLr, 0.9f, 0.999f, 1e-7f, 1,
                             kWeightDecay)
                  .ok());
  const Values decayed = Host(StatusOr<Tensor>(var));
  EXPECT_NEAR(decayed[0], 1.99f, 1e-6);
  EXPECT_NEAR(decayed[1], -3.98f, 1e-6);
  EXPECT_THAT(ops::ApplyAdam(var, m, v, Make(Shape{2}, {0, 0}), kLr, 0.9f, 0.999f, 1e-7f, 1, -1)
                  .message(),
              HasSubstr("weight decay must be finite and >= 0"));
}

// Replicas that share their variables update slices of them in host memory as the sums
// arrive (ops::SgdOnHost, AdamOnHost), at boundaries the all-reduce picks: any slicing, at
// any alignment, must give the bits of the op over the whole tensor.
TEST(OpsCpuTest, HostUpdatesOfAnySlicingGiveTheBitsOfTheOps) {
  constexpr int64_t n = 1003;
  const Values w = RandomValues(n, 1.0f, 40);
  const Values g = RandomValues(n, 0.5f, 41);
  const Values m0 = RandomValues(n, 0.1f, 42);
  Values v0 = RandomValues(n, 0.01f, 43);
  for (float& x : v0) x = std::fabs(x);
  const std::vector<int64_t> cuts = {0, 1, 7, 16, 333, 517, 518, 999, n};
  for (float momentum : {0.0f, 0.9f}) {
    for (bool nesterov : {false, true}) {
      Tensor var = Make(Shape{n}, w);
      Tensor velocity = Make(Shape{n}, m0);
      const Tensor grad = Make(Shape{n}, g);
      if (momentum == 0) {
        ASSERT_TRUE(ops::ApplySgd(var, grad, 0.1f).ok());
      } else {
        ASSERT_TRUE(ops::ApplySgdMomentum(var, velocity, grad, 0.1f, momentum, nesterov).ok());
      }
      const attrs::Sgd sgd = *ops::SgdAttrs(0.1f, momentum, nesterov);
      Values host_w = w, host_v = m0;
      for (size_t c = 0; c + 1 < cuts.size(); ++c) {
        const int64_t b = cuts[c], e = cuts[c + 1];
        ops::SgdOnHost(sgd, host_w.data() + b, momentum == 0 ? nullptr : host_v.data() + b,
                       g.data() + b, e - b);
      }
      const std::string tag = "momentum " + std::to_string(momentum) + (nesterov ? " nesterov" : "");
      EXPECT_TRUE(testing::SameBits(Host(var), host_w)) << tag;
      EXPECT_TRUE(testing::SameBits(Host(velocity), host_v)) << tag;
    }
  }
  Tensor var = Make(Shape{n}, w), m = Make(Shape{n}, m0), v = Make(Shape{n}, v0);
  ASSERT_TRUE(ops::ApplyAdam(var, m, v, Make(Shape{n}, g), 0.01f, 0.9f, 0.999f, 1e-7f, 3).ok());
  const attrs::Adam adam = *ops::AdamAttrs(0.01f, 0.9f, 0.999f, 1e-7f, 3);
  Values host_w = w, host_m = m0, host_v = v0;
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    const int64_t b = cuts[c], e = cuts[c + 1];
    ops::AdamOnHost(adam, host_w.data() + b, host_m.data() + b, host_v.data() + b,
                    g.data() + b, e - b);
  }
  EXPECT_TRUE(testing::SameBits(Host(var), host_w));
  EXPECT_TRUE(testing::SameBits(Host(m), host_m));
  EXPECT_TRUE(testing::SameBits(Host(v), host_v));
  // The checks are the ops': the same messages.
  EXPECT_THAT(ops::AdamAttrs(0.1f, 0.9f, 0.999f, 1e-7f, 0).status().message(),
              HasSubstr("step 0"));
  EXPECT_THAT(ops::SgdAttrs(0.1f, 1.0f, false).status().message(),
              HasSubstr("momentum must be in [0, 1)"));
}

TEST(OpsCpuTest, ShapeAndTypeErrorsNameBothShapes) {
  const Tensor a = Make(Shape{2, 3}, RandomValues(6, 1, 20));
  const Tensor b = Make(Shape{3, 2}, RandomValues(6, 1, 21));
  const Tensor v = Make(Shape{3}, RandomValues(3, 1, 22));
  const Tensor labels = *Tensor::FromHostInt32(Cpu(), Shape{2}, std::vector<int32_t>{0, 1});
  struct Bad {
    Status status;
    std::vector<std::string> fragments;
  };
  const Bad cases[] = {
      {ops::Add(a, b).status(), {"Add: incompatible shapes [2, 3] and [3, 2]"}},
      {ops::Sub(a, v).status(), {"Sub", "[2, 3]", "[3]"}},
      {ops::Mul(a, labels).status(), {"Mul: the second input must be float32, got int32"}},
      {ops::MatMul(a, a).status(), {"MatMul: inner dimensions differ: a [2, 3] and b [2, 3]"}},
      {ops::MatMul(a, v).status(), {"MatMul: b must have rank 2, got shape [3]"}},
      {ops::MatMul(a, a, false, true).ok() ? OkStatus() : InternalError("transpose_b failed"), {}},
      {ops::BiasAdd(b, v).status(), {"BiasAdd", "[3, 2]", "[3]"}},
      {ops::AddN({}).status(), {"AddN: needs at least one input"}},
      {ops::AddN({a, b}).status(), {"AddN: input 1 differs in shape: [2, 3] and [3, 2]"}},
      {ops::Softmax(v).status(), {"Softmax: logits must have rank 2"}},
      {ops::MeanSquaredError(a, b).status(), {"MeanSquaredError: incompatible shapes [2, 3] and [3, 2]"}},
      {ops::MeanSquaredError(a, a, 1).status(), {"global batch size (1) must be positive and at least the rows given (2)"}},
      {ops::SparseSoftmaxCrossEntropy(b, labels).status(), {"logits and labels need as many rows; got [3, 2] and [2]"}},
      {ops::SparseSoftmaxCrossEntropy(a, a).status(), {"labels must be int32, got float32"}},
      {ops::Concat({a, b}).status(), {"Concat: input 1 does not match input 0", "[2, 3] and [3, 2]"}},
      {ops::Concat({}).status(), {"Concat: needs at least one input"}},
      {ops::Split(a, {1, 2}).status(), {"Split: sizes add up to 3 but x [2, 3] has 2 rows"}},
      {ops::Split(a, {3, -1}).status(), {"Split: negative size -1"}},
      {ops::SplitEvenly(a, 0).status(), {"parts must be positive"}},
      {ops::Relu(Tensor()).status(), {"Relu: x is an empty Tensor handle"}},
      {ops::ReduceSum(labels).status(), {"ReduceSum: x must be float32, bfloat16 or float16, got int32"}},
  };
  for (const Bad& bad : cases) {
    if (bad.fragments.empty()) {
      EXPECT_TRUE(bad.status.ok()) << bad.status;
      continue;
    }
    EXPECT_TRUE(IsInvalidArgument(bad.status)) << bad.status;
    for (const std::string& fragment : bad.fragments) {
      EXPECT_THAT(bad.status.message(), HasSubstr(fragment));
    }
  }
  Tensor var = Make(Shape{2, 3}, RandomValues(6, 1, 23));
  EXPECT_THAT(ops::ApplySgd(var, b, 0.1f).message(), HasSubstr("[2, 3] and [3, 2]"));
  EXPECT_THAT(ops::ApplySgd(var, a, -1).message(), HasSubstr("learning rate must be finite and >= 0"));
  Tensor velocity = Make(Shape{2, 3}, Values(6, 0.0f));
  EXPECT_THAT(ops::ApplySgdMomentum(var, velocity, a, 0.1f, 1.0f, false).message(),
              HasSubstr("momentum must be in [0, 1)"));
}

// ---- Mixed precision: bfloat16 and float16 tensors ------------------------------------------
// The 16-bit kernels compute in float32 and round once (to nearest even) to their dtype. They
// are checked against the double references rounded once (reference::RoundToDType), bitwise
// against the float32 kernels' results rounded by ops/dtype.h's scalar helpers, and Cast's
// loops bitwise against those helpers.

using Bits16 = std::vector<uint16_t>;
using Doubles = std::vector<double>;
constexpr DType k16BitTypes[] = {DType::kBFloat16, DType::kFloat16};
constexpr double kUnit = 5.9604644775390625e-08;  // 2^-24, float32's unit roundoff

uint16_t ToBits16(float value, DType dtype) {
  return dtype == DType::kBFloat16 ? FloatToBFloat16(value) : FloatToFloat16(value);
}

float FromBits16(uint16_t bits, DType dtype) {
  return dtype == DType::kBFloat16 ? BFloat16ToFloat(bits) : Float16ToFloat(bits);
}

// Random values that `dtype` holds exactly (random floats rounded through the helpers): 3 in
// 4 uniform in [-scale, scale], the others of log-uniform magnitude in [2^-20, 1]·scale
// (float16's subnormals, tanh's linear range, sums of many binades).
Values Random16(int64_t n, float scale, uint32_t seed, DType dtype) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  std::uniform_real_distribution<float> exponent(-20, 0);
  Values v(static_cast<size_t>(n));
  for (float& x : v) {
    float value = uniform(rng);
    if (rng() % 4 == 0) value = std::copysign(scale * std::exp2(exponent(rng)), value);
    x = FromBits16(ToBits16(value, dtype), dtype);
  }
  return v;
}

// A 16-bit tensor of values it holds exactly (or NaN).
Tensor Make16(const Shape& shape, const Values& values, DType dtype) {
  Bits16 bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    bits[i] = ToBits16(values[i], dtype);
    TOWER_CHECK(std::isnan(values[i]) || FromBits16(bits[i], dtype) == values[i])
        << values[i] << " is not a " << DTypeName(dtype);
  }
  StatusOr<Tensor> t = Tensor::FromHostBytes(Cpu(), shape, dtype, bits.data());
  TOWER_CHECK_OK(t.status());
  return *t;
}

// The bits of a result, which must have `dtype` (else a failure and no bits).
Bits16 Host16(const StatusOr<Tensor>& t, DType dtype) {
  TOWER_CHECK_OK(t.status());
  if (t->dtype() != dtype) {
    ADD_FAILURE() << "a " << DTypeName(t->dtype()) << " result, want " << DTypeName(dtype);
    return {};
  }
  Bits16 bits(static_cast<size_t>(t->num_elements()));
  TOWER_CHECK_OK(t->ToHostBytes(bits.data()));
  return bits;
}

// Sign and magnitude -> an integer in the order of the values (±0 both 0): neighbouring
// 16-bit values differ by 1.
int Ordered(uint16_t bits) { return (bits & 0x8000) ? -(bits & 0x7fff) : (bits & 0x7fff); }

// How far the float32 value that a 16-bit kernel rounds may be from the exact value t.
using FloatError = std::function<double(double t)>;
const FloatError kExact = [](double) { return 0.0; };

// A 16-bit result against the exact values `want`. Each element must read as
// RoundToDType(want) (±0 alike), or as its neighbour where the kernel's float32 value f,
// within float_error(want) of want, may lie across the rounding midpoint m between the two:
// only if |want − m| <= float_error(want). With no float error the result must be exact; with
// one below the 16-bit type's spacing it may be one ulp off, and only next to a tie. A NaN
// passes only where want is NaN. Reports the first few failures.
void Expect16(const Bits16& got, DType dtype, const Doubles& want, const FloatError& float_error,
              const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  std::ostringstream first;  // the first few failures
  first.precision(9);
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = FromBits16(got[i], dtype);
    const double w = reference::RoundToDType(want[i], dtype);
    bool ok = false;
    if (std::isnan(want[i])) {
      ok = std::isnan(g);
    } else if (g == w) {  // false for a NaN g
      ok = true;
    } else if (!std::isnan(g)) {
      const double error = float_error(want[i]);
      const uint16_t rounded = ToBits16(static_cast<float>(w), dtype);  // exact: a 16-bit value
      const int distance = std::abs(Ordered(got[i]) - Ordered(rounded));
      ok = error > 0 && distance == 1 && std::fabs(want[i] - (g + w) / 2) <= error;
    }
    if (!ok && ++failures <= 5) {
      first << "\n  element " << i << " is " << g << " (0x" << std::hex << got[i] << std::dec
            << "), want " << w << " (exact " << want[i] << ")";
    }
  }
  EXPECT_EQ(failures, 0) << what << ": elements outside the bound:" << first.str();
}

// The helper itself: exact means exact, one ulp only next to a tie, and NaN never passes.
TEST(OpsCpuTest, The16BitComparisonFailsOnNaNAndOffByOneAwayFromTies) {
  const DType bf16 = DType::kBFloat16;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const uint16_t one = 0x3F80, above_one = 0x3F81;  // 1 and 1 + 2^-7
  const FloatError tiny = [](double t) { return 1e-6 * std::fabs(t); };
  EXPECT_NONFATAL_FAILURE(Expect16({ToBits16(nan, bf16)}, bf16, {1.0}, tiny, "nan"),
                          "element 0 is nan");
  EXPECT_NONFATAL_FAILURE(Expect16({one}, bf16, {nan}, tiny, "want nan"), "element 0 is 1");
  EXPECT_NONFATAL_FAILURE(Expect16({above_one}, bf16, {1.0}, kExact, "exact"),
                          "element 0 is 1.0078125");
  // 1 + 2^-8 + 2^-18: above the tie between 1 and 1 + 2^-7 by 2^-18, more than `tiny`.
  EXPECT_NONFATAL_FAILURE(Expect16({one}, bf16, {1.0 + 0x1p-8 + 0x1p-18}, tiny, "not a tie"),
                          "element 0 is 1");
  EXPECT_NONFATAL_FAILURE(Expect16({0x3F82}, bf16, {1.0 + 0x1p-8}, tiny, "two ulps"),
                          "element 0 is 1.015625");
  Expect16({one, above_one, one, 0x0000}, bf16, {1.0, 1.0 + 0x1p-7, 1.0 + 0x1p-8 + 0x1p-22, -0.0},
           tiny, "within");
}

// Floats that take every path of both narrowing conversions: every bfloat16 and float16
// value, each midpoint between neighbours (a tie) and the floats on either side of it, ±0,
// ±Inf, NaNs (quiet and signalling, payloads high and low, both signs), float subnormals,
// and random bit patterns.
Values CastInputs() {
  Values x;
  auto from_word = [](uint32_t word) {
    float f;
    std::memcpy(&f, &word, 4);
    return f;
  };
  for (DType dtype : k16BitTypes) {
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      const float v = FromBits16(static_cast<uint16_t>(bits), dtype);
      x.push_back(v);
      if ((bits & 0x7fff) >= (dtype == DType::kFloat16 ? 0x7bff : 0x7f7f)) continue;  // last
      const float next = FromBits16(static_cast<uint16_t>(bits + 1), dtype);
      const float tie = static_cast<float>((double{v} + next) / 2);  // exact: 12 bits or fewer
      x.insert(x.end(), {tie, std::nextafter(tie, 0.0f), std::nextafter(tie, 2 * tie)});
    }
  }
  for (uint32_t word : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                        0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7fffffffu,
                        0x7fa00000u, 0x7f802000u, 0x00000001u, 0x807fffffu, 0x7f7fffffu,
                        0x477ff000u, 0x477fefffu, 0x33000000u, 0x33000001u, 0x387fffffu}) {
    x.push_back(from_word(word));
  }
  std::mt19937 rng(77);
  for (int i = 0; i < 1000000; ++i) x.push_back(from_word(static_cast<uint32_t>(rng())));
  return x;
}

TEST(OpsCpuTest, CastBetweenFloat32And16BitIsBitwiseTheScalarHelpers) {
  const Values x = CastInputs();
  const int64_t n = static_cast<int64_t>(x.size());
  const Tensor t = Make(Shape{n, 1}, x);
  for (DType dtype : k16BitTypes) {
    const std::string name(DTypeName(dtype));
    const Bits16 got = Host16(ops::Cast(t, dtype), dtype);
    ASSERT_EQ(got.size(), x.size());
    int failures = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t want = ToBits16(x[i], dtype);
      if (got[i] != want && ++failures <= 5) {
        uint32_t word;
        std::memcpy(&word, &x[i], 4);
        ADD_FAILURE() << "float32 -> " << name << " of 0x" << std::hex << word << " (" << x[i]
                      << ") is 0x" << got[i] << ", the helper's 0x" << want;
      }
    }
    EXPECT_EQ(failures, 0) << "float32 -> " << name;
    // Every 16-bit pattern back to float32 (exact), bit for bit.
    Bits16 all(0x10000);
    std::iota(all.begin(), all.end(), uint16_t{0});
    const Values wide =
        Host(ops::Cast(*Tensor::FromHostBytes(Cpu(), Shape{0x10000}, dtype, all.data()),
                       DType::kFloat32));
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      const float want = FromBits16(static_cast<uint16_t>(bits), dtype);
      ASSERT_EQ(std::memcmp(&wide[bits], &want, 4), 0)
          << name << " 0x" << std::hex << bits << " -> float32 " << wide[bits] << ", want "
          << want;
    }
    // Every length up to 40 from every offset up to 3 (views: loops that start unaligned and
    // end in scalar tails), both ways.
    for (int64_t offset = 0; offset < 4; ++offset) {
      for (int64_t length = 0; length <= 40; ++length) {
        const Tensor view = *t.Slice(offset + 1000, offset + 1000 + length);
        const Bits16 narrow = Host16(ops::Cast(view, dtype), dtype);
        ASSERT_EQ(narrow.size(), static_cast<size_t>(length));
        for (int64_t i = 0; i < length; ++i) {
          ASSERT_EQ(narrow[i], ToBits16(x[offset + 1000 + i], dtype))
              << name << " offset " << offset << " length " << length << " element " << i;
        }
        const Tensor half = *Tensor::FromHostBytes(Cpu(), Shape{44, 1}, dtype, all.data() + 1000);
        const Values back = Host(ops::Cast(*half.Slice(offset, offset + length), DType::kFloat32));
        for (int64_t i = 0; i < length; ++i) {
          const float want = FromBits16(static_cast<uint16_t>(1000 + offset + i), dtype);
          ASSERT_EQ(std::memcmp(&back[i], &want, 4), 0) << name << " back, element " << i;
        }
      }
    }
  }
}

struct Case16 {
  int64_t rows;
  int64_t cols;
};

// Odd shapes, a single element, empty ones, rows longer than a block of the 16-bit kernels
// (1024 floats) and several blocks in all.
const Case16 k16BitCases[] = {{1, 1}, {7, 13}, {33, 65}, {0, 5}, {5, 0}, {3, 2500}, {257, 129}};

std::string Name(const Case16& c, DType dtype) {
  return std::string(DTypeName(dtype)) + " [" + std::to_string(c.rows) + ", " +
         std::to_string(c.cols) + "]";
}

// Relu and its gradient select one of their inputs (or 0): the float32 value is exact, so
// rounding it once gives back the input. Sigmoid, tanh and the gradients' products: the
// float32 value f is off the exact t by the float32 kernel's error, below the 16-bit spacing
// (2^-8 of the value for bfloat16, 2^-11 for float16, more for float16's subnormals), so the
// rounded result is t rounded once or, next to a tie, its neighbour (Expect16). The bounds
// on |f − t| (u = 2^-24):
//  - tanh: Eigen's rational approximation (below |x| = 0.0004 it returns x, off by x³/3):
//    within 4.9·u·|t| over every float x with |x| in [2^-24, 88] (measured): 8·u·|t|.
//  - sigmoid: for x >= -9 Eigen interpolates sigmoid(x) − 0.5, so its error is absolute:
//    within 2.93·u over every float x in [-9, 20] (measured; 1.09 float16 spacings at worst,
//    near x = -8.47, though not at any float16 x: see the exhaustive test below); 4·u. Below
//    -9 (t < sigmoid(-9) = 1.2339e-4) it returns exp(x), off by e^x ≈ t relatively, plus
//    exp's error (< 5·u·t measured): t·(t + 8·u). Eigen's vectorised exp returns 0 where the
//    result is below float32's smallest normal (x < -87.3), where bfloat16 still has
//    subnormals: the float32 kernel's own underflow, which the 16-bit kernel keeps; inputs
//    here stay above -87.
//  - the gradients: dy·y·(1 − y) and dy·(1 − y·y) take at most three float32 roundings
//    (y·y of a 16-bit y is exact): 4·u·|t|.
const FloatError kTanhError = [](double t) { return 8 * kUnit * std::fabs(t); };
const FloatError kSigmoidError = [](double t) {
  return t < 1.2339e-4 ? t * (t + 8 * kUnit) : 4 * kUnit;
};
const FloatError kGradError = [](double t) { return 4 * kUnit * std::fabs(t); };

TEST(OpsCpuTest, SixteenBitActivationsRoundTheExactValueOnce) {
  for (DType dtype : k16BitTypes) {
    for (const Case16& c : k16BitCases) {
      const Shape shape{c.rows, c.cols};
      const int64_t n = shape.num_elements();
      const std::string name = Name(c, dtype);
      Values x = Random16(n, 8, 30, dtype);
      if (n >= 4) {  // ±0 and ±Inf: Relu and ReluGrad select them like any value
        x[0] = 0.0f;
        x[1] = -0.0f;
        x[2] = std::numeric_limits<float>::infinity();
        x[3] = -std::numeric_limits<float>::infinity();
      }
      const Values dy = Random16(n, 1, 31, dtype);
      const Tensor tx = Make16(shape, x, dtype), tdy = Make16(shape, dy, dtype);
      Expect16(Host16(ops::Relu(tx), dtype), dtype, reference::ReluInDouble(x), kExact,
               "Relu " + name);
      Expect16(Host16(ops::ReluGrad(tdy, tx), dtype), dtype, reference::ReluGradInDouble(dy, x),
               kExact, "ReluGrad " + name);
      for (float scale : {16.0f, 80.0f}) {
        const Values s = Random16(n, scale, 32, dtype);
        Expect16(Host16(ops::Sigmoid(Make16(shape, s, dtype)), dtype), dtype,
                 reference::SigmoidInDouble(s), kSigmoidError, "Sigmoid " + name);
      }
      for (float scale : {4.0f, 40.0f}) {
        const Values th = Random16(n, scale, 33, dtype);
        Expect16(Host16(ops::Tanh(Make16(shape, th, dtype)), dtype), dtype,
                 reference::TanhInDouble(th), kTanhError, "Tanh " + name);
      }
      // y as the activations give it: sigmoid in [0, 1], tanh in [-1, 1].
      Values y = Random16(n, 1, 34, dtype);
      const Tensor ty = Make16(shape, y, dtype);
      Expect16(Host16(ops::TanhGrad(tdy, ty), dtype), dtype, reference::TanhGradInDouble(dy, y),
               kGradError, "TanhGrad " + name);
      for (float& v : y) v = std::fabs(v);
      Expect16(Host16(ops::SigmoidGrad(tdy, Make16(shape, y, dtype)), dtype), dtype,
               reference::SigmoidGradInDouble(dy, y), kGradError, "SigmoidGrad " + name);
    }
  }
}

// Every finite 16-bit input of the one-input activations (bfloat16's sigmoid from -87 up, as
// above). All round the exact value once but for sigmoid's neighbours: 60 float16 inputs in
// [-9, -5], where sigmoid is small and Eigen's absolute error is most of a float16 spacing
// (the exact value as far as 0.44 spacings from the tie it was rounded across), and one
// bfloat16 input (-9.75, next to a tie).
TEST(OpsCpuTest, SixteenBitActivationsOnEveryInput) {
  for (DType dtype : k16BitTypes) {
    const std::string name(DTypeName(dtype));
    Values x, s;
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      const float v = FromBits16(static_cast<uint16_t>(bits), dtype);
      if (!std::isfinite(v)) continue;
      x.push_back(v);
      if (v >= -87) s.push_back(v);
    }
    const Tensor tx = Make16(Shape{static_cast<int64_t>(x.size())}, x, dtype);
    const Tensor ts = Make16(Shape{static_cast<int64_t>(s.size())}, s, dtype);
    Expect16(Host16(ops::Relu(tx), dtype), dtype, reference::ReluInDouble(x), kExact,
             "Relu of every " + name);
    Expect16(Host16(ops::Tanh(tx), dtype), dtype, reference::TanhInDouble(x), kTanhError,
             "Tanh of every " + name);
    Expect16(Host16(ops::Sigmoid(ts), dtype), dtype, reference::SigmoidInDouble(s),
             kSigmoidError, "Sigmoid of every " + name);
  }
}

// x + bias: of two values of one 16-bit type the float32 sum is the exact sum rounded to 24
// bits, and rounding that to 11 or 8 bits gives the exact sum rounded once (a double
// rounding is innocuous for one addition when the first precision is at least 2p + 2 bits:
// 24 >= 2·11 + 2; Figueroa, "When is double rounding innocuous?", 1995). A float32 bias has
// 24 bits itself: the float32 sum may round to a 16-bit tie the exact sum was not on, so the
// result is the exact sum rounded to float32 and then to the 16-bit type (the kernel's stated
// arithmetic; one ulp at most from the exact sum rounded once, next to a tie only).
TEST(OpsCpuTest, SixteenBitBiasAddRoundsTheFloat32SumOnce) {
  for (DType dtype : k16BitTypes) {
    for (const Case16& c : k16BitCases) {
      const Shape shape{c.rows, c.cols};
      for (float scale : {1.0f, 300.0f}) {
        const std::string name = Name(c, dtype) + " x" + std::to_string(static_cast<int>(scale));
        const Values x = Random16(shape.num_elements(), scale, 40, dtype);
        const Tensor tx = Make16(shape, x, dtype);
        // Like-typed bias: exact.
        const Values bias16 = Random16(c.cols, scale, 41, dtype);
        Expect16(Host16(ops::BiasAdd(tx, Make16(Shape{c.cols}, bias16, dtype)), dtype), dtype,
                 reference::BiasAddInDouble(x, shape, bias16), kExact, "BiasAdd " + name);
        // float32 bias: one float32 rounding, then one 16-bit rounding.
        const Values bias32 = RandomValues(c.cols, scale, 42);
        const Bits16 got = Host16(ops::BiasAdd(tx, Make(Shape{c.cols}, bias32)), dtype);
        const Doubles exact = reference::BiasAddInDouble(x, shape, bias32);
        Doubles in_float32 = exact;
        for (double& v : in_float32) v = static_cast<float>(v);
        Expect16(got, dtype, in_float32, kExact, "BiasAdd float32 bias, as the kernel " + name);
        Expect16(got, dtype, exact, [](double t) { return kUnit * std::fabs(t); },
                 "BiasAdd float32 bias " + name);
      }
    }
    // The double rounding itself: 1 + (2^-p + 2^-(p+23)) with p = 8 (bfloat16) or 11 (float16)
    // is just above the tie between 1 and 1 + 2^-(p-1); float32 rounds it onto the tie, which
    // goes to the even 1, where rounding once would have given 1 + 2^-(p-1).
    const int p = dtype == DType::kBFloat16 ? 8 : 11;
    const float bias = std::ldexp(1.0f, -p) + std::ldexp(1.0f, -p - 23);
    const Bits16 got = Host16(ops::BiasAdd(Make16(Shape{1, 1}, {1.0f}, dtype),
                                           Make(Shape{1}, {bias})), dtype);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(FromBits16(got[0], dtype), 1.0f) << DTypeName(dtype);
    EXPECT_EQ(reference::RoundToDType(1.0 + bias, dtype), 1.0f + std::ldexp(1.0f, 1 - p));
  }
}

// Sums of 16-bit values into float32, accumulated in double in row order (as the float32
// kernel sums columns): the accumulation errs by at most rows·2^-53·Σ|x| (nothing for these
// inputs, whose sums fit in double's 53 bits), and the one rounding to float32 by
// 2^-24·|Σ x|. A float32 accumulation (2^-24 per addition) fails this.
TEST(OpsCpuTest, SixteenBitReductionsAccumulateInDoubleIntoFloat32) {
  const Case16 cases[] = {{1, 1}, {7, 13}, {0, 5}, {5, 0}, {4099, 3}, {300, 1}, {257, 129},
                          {40, 300}};
  for (DType dtype : k16BitTypes) {
    for (const Case16& c : cases) {
      const Shape shape{c.rows, c.cols};
      const Values x = Random16(shape.num_elements(), 4, 50, dtype);
      const Tensor t = Make16(shape, x, dtype);
      for (auto axis : {ops::ReduceAxis::kAll, ops::ReduceAxis::kBatch}) {
        const bool all = axis == ops::ReduceAxis::kAll;
        const std::string name = Name(c, dtype) + (all ? " all" : " batch");
        const Doubles sum = reference::ReduceSumInDouble(x, shape, axis);
        const Doubles abs = reference::ReduceSumInDouble(x, shape, axis, /*absolute=*/true);
        const double rows = all ? static_cast<double>(shape.num_elements()) : c.rows;
        for (bool mean : {false, true}) {
          if (mean && rows == 0) continue;  // NaN, as for float32
          StatusOr<Tensor> got = mean ? ops::ReduceMean(t, axis) : ops::ReduceSum(t, axis);
          ASSERT_TRUE(got.ok()) << got.status();
          EXPECT_EQ(got->dtype(), DType::kFloat32) << name;
          EXPECT_EQ(got->shape(), all ? Shape() : Shape{c.cols}) << name;
          Values want(sum.size()), bound(sum.size());
          const double divisor = mean ? rows : 1.0;
          for (size_t j = 0; j < sum.size(); ++j) {
            want[j] = static_cast<float>(sum[j] / divisor);
            bound[j] = (kUnit * std::fabs(sum[j]) + rows * 0x1p-53 * abs[j]) / divisor;
          }
          ExpectWithin(Host(got), want, bound, (mean ? "ReduceMean " : "ReduceSum ") + name);
        }
      }
    }
  }
}

// The 16-bit kernels compute what the float32 kernels compute (the same Eigen expressions on
// float blocks aligned as a tensor is): their results are the float32 kernels' results on
// the widened inputs, rounded once by the scalar helper, bit for bit, NaN and Inf included.
TEST(OpsCpuTest, SixteenBitKernelsGiveTheFloat32KernelsResultsRounded) {
  for (DType dtype : k16BitTypes) {
    for (int64_t n : {1, 15, 16, 17, 1023, 1024, 1025, 4111}) {
      const std::string name = std::string(DTypeName(dtype)) + " n=" + std::to_string(n);
      const Shape shape{n};
      Values x = Random16(n, 12, 60, dtype);
      const Values dy = Random16(n, 1, 61, dtype);
      const Values y = Random16(n, 1, 62, dtype);
      const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), -0.0f};
      for (int64_t i = 0; i < 4 && 3 * i < n; ++i) x[3 * i] = special[i];
      const Tensor x16 = Make16(shape, x, dtype), dy16 = Make16(shape, dy, dtype);
      const Tensor y16 = Make16(shape, y, dtype);
      const Tensor x32 = Make(shape, x), dy32 = Make(shape, dy), y32 = Make(shape, y);
      auto expect_same = [&](const StatusOr<Tensor>& half, const StatusOr<Tensor>& full,
                             const std::string& what) {
        const Bits16 got = Host16(half, dtype);
        const Values f = Host(full);
        ASSERT_EQ(got.size(), f.size()) << what;
        for (size_t i = 0; i < f.size(); ++i) {
          ASSERT_EQ(got[i], ToBits16(f[i], dtype))
              << what << " " << name << " element " << i << ": float32 kernel " << f[i];
        }
      };
      expect_same(ops::Relu(x16), ops::Relu(x32), "Relu");
      expect_same(ops::ReluGrad(dy16, x16), ops::ReluGrad(dy32, x32), "ReluGrad");
      expect_same(ops::Sigmoid(x16), ops::Sigmoid(x32), "Sigmoid");
      expect_same(ops::SigmoidGrad(dy16, y16), ops::SigmoidGrad(dy32, y32), "SigmoidGrad");
      expect_same(ops::Tanh(x16), ops::Tanh(x32), "Tanh");
      expect_same(ops::TanhGrad(dy16, y16), ops::TanhGrad(dy32, y32), "TanhGrad");
      // BiasAdd over 3 rows of n, both kinds of bias; ReduceSum along those rows.
      const Values rows = Random16(3 * n, 100, 63, dtype);
      const Tensor rows16 = Make16(Shape{3, n}, rows, dtype), rows32 = Make(Shape{3, n}, rows);
      expect_same(ops::BiasAdd(rows16, dy16), ops::BiasAdd(rows32, dy32), "BiasAdd");
      const Tensor bias = Make(shape, RandomValues(n, 1, 64));
      expect_same(ops::BiasAdd(rows16, bias), ops::BiasAdd(rows32, bias), "BiasAdd float32 bias");
      if (n > 1) {  // one column: the float32 kernel sums in another order
        const Values s16 = Host(ops::ReduceSum(rows16, ops::ReduceAxis::kBatch));
        const Values s32 = Host(ops::ReduceSum(rows32, ops::ReduceAxis::kBatch));
        ASSERT_EQ(s16.size(), s32.size());
        EXPECT_EQ(std::memcmp(s16.data(), s32.data(), 4 * s16.size()), 0) << "ReduceSum " << name;
      }
    }
  }
}

TEST(OpsCpuTest, SixteenBitOpsNameMixedDTypesAndGiveTheirDTypes) {
  const DType bf16 = DType::kBFloat16, f16 = DType::kFloat16;
  const Tensor xb = Make16(Shape{2, 3}, Random16(6, 1, 70, bf16), bf16);
  const Tensor xh = Make16(Shape{2, 3}, Random16(6, 1, 71, f16), f16);
  const Tensor xf = Make(Shape{2, 3}, RandomValues(6, 1, 72));
  const Tensor xb_t = Make16(Shape{3, 2}, Random16(6, 1, 73, bf16), bf16);
  const Tensor bias_b = Make16(Shape{3}, Random16(3, 1, 74, bf16), bf16);
  const Tensor bias_h = Make16(Shape{3}, Random16(3, 1, 75, f16), f16);
  const Tensor bias_f = Make(Shape{3}, RandomValues(3, 1, 76));
  const Tensor labels = *Tensor::FromHostInt32(Cpu(), Shape{2}, std::vector<int32_t>{0, 1});
  struct Bad {
    Status status;
    std::string message;
  };
  const Bad cases[] = {
      {ops::ReluGrad(xb, xf).status(),
       "ReluGrad: dy and x must have the same dtype, got bfloat16 and float32"},
      {ops::ReluGrad(xf, xh).status(),
       "ReluGrad: dy and x must have the same dtype, got float32 and float16"},
      {ops::SigmoidGrad(xh, xb).status(),
       "SigmoidGrad: dy and y must have the same dtype, got float16 and bfloat16"},
      {ops::TanhGrad(xf, xb).status(),
       "TanhGrad: dy and y must have the same dtype, got float32 and bfloat16"},
      {ops::TanhGrad(xb, xb_t).status(), "TanhGrad: incompatible shapes [2, 3] and [3, 2]"},
      {ops::BiasAdd(xf, bias_b).status(),
       "BiasAdd: bias must be float32 or of x's dtype, got x float32 and bias bfloat16"},
      {ops::BiasAdd(xb, bias_h).status(),
       "BiasAdd: bias must be float32 or of x's dtype, got x bfloat16 and bias float16"},
      {ops::Relu(labels).status(), "Relu: x must be float32, bfloat16 or float16, got int32"},
      {ops::ReluGrad(labels, labels).status(),
       "ReluGrad: dy must be float32, bfloat16 or float16, got int32"},
      {ops::BiasAdd(xb, labels).status(),
       "BiasAdd: bias must be float32, bfloat16 or float16, got int32"},
      {ops::ReduceMean(labels).status(),
       "ReduceMean: x must be float32, bfloat16 or float16, got int32"},
  };
  for (const Bad& bad : cases) {
    EXPECT_TRUE(IsInvalidArgument(bad.status)) << bad.status;
    EXPECT_THAT(bad.status.message(), HasSubstr(bad.message));
  }
  // The output dtypes: an activation's and BiasAdd's are the input's (x's), a sum's float32.
  for (const Tensor* x : {&xb, &xh}) {
    EXPECT_EQ(ops::Relu(*x)->dtype(), x->dtype());
    EXPECT_EQ(ops::TanhGrad(*x, *x)->dtype(), x->dtype());
    EXPECT_EQ(ops::BiasAdd(*x, bias_f)->dtype(), x->dtype());
    StatusOr<Tensor> sum = ops::ReduceSum(*x, ops::ReduceAxis::kBatch);
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ(sum->dtype(), DType::kFloat32);
    EXPECT_EQ(sum->shape(), Shape{3});
  }
  EXPECT_EQ(ops::BiasAdd(xh, bias_h)->dtype(), f16);
}

}  // namespace
}  // namespace tower
