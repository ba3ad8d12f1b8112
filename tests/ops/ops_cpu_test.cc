// Every op's CPU kernel against the plain reference (ops/reference), on odd shapes, an
// empty batch and large values. Tolerances are stated per op; floating-point error bounds
// follow the usual forms (k·ε·|A|·|B| for a product of inner size k).
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
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

TEST(OpsCpuTest, MatMulAllTransposes) {
  for (const Case& c : kCases) {
    const int64_t m = c.rows, k = c.cols, n = 11;
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        const Shape a_shape = ta ? Shape{k, m} : Shape{m, k};
        const Shape b_shape = tb ? Shape{n, k} : Shape{k, n};
        const Values a = RandomValues(m * k, c.scale, 1);
        const Values b = RandomValues(k * n, c.scale, 2);
        const Values got = Host(ops::MatMul(Make(a_shape, a), Make(b_shape, b), ta, tb));
        const Values want = reference::MatMul(a, a_shape, b, b_shape, ta, tb);
        // Error bound of a float dot product of length k: k·ε·Σ|a||b| (plus headroom).
        Values bound = reference::MatMul(Abs(a), a_shape, Abs(b), b_shape, ta, tb);
        for (float& x : bound) x *= 2 * (k + 1) * kEps;
        ExpectWithin(got, want, bound, "MatMul " + Name(c) + " ta=" + std::to_string(ta) +
                                           " tb=" + std::to_string(tb));
      }
    }
  }
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
  auto same_bits = [](const Values& a, const Values& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
  };
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
      EXPECT_TRUE(same_bits(Host(var), host_w)) << tag;
      EXPECT_TRUE(same_bits(Host(velocity), host_v)) << tag;
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
  EXPECT_TRUE(same_bits(Host(var), host_w));
  EXPECT_TRUE(same_bits(Host(m), host_m));
  EXPECT_TRUE(same_bits(Host(v), host_v));
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
      {ops::ReduceSum(labels).status(), {"ReduceSum: x must be float32, got int32"}},
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

}  // namespace
}  // namespace tower
