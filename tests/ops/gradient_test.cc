// Gradient ops checked by central finite differences of the forward ops: for a scalar
// f(x) = Σ w ⊙ op(x) with fixed random w, the gradient op fed dy = w must match
// (f(x + h·e_i) − f(x − h·e_i)) / 2h. Forward values are float, so h = 1e-2 relative and a
// tolerance of 2e-3 (relative to the gradient's scale) separate a wrong formula (O(1) off)
// from rounding (≈ ε·|f|/h).
#include <cmath>
#include <functional>
#include <random>

#include <gtest/gtest.h>

#include "device/context.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"

namespace tower {
namespace {

using Values = std::vector<float>;

Device* Cpu() { return *Context::Global().FindDevice("/CPU:0"); }

Values RandomValues(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Values v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor Make(const Shape& shape, const Values& values) {
  return *Tensor::FromHost(Cpu(), shape, values);
}

double Dot(const Values& a, const Values& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double{a[i]} * b[i];
  return s;
}

// Checks `analytic` against central differences of the scalar function `f` at `x`.
void CheckGradient(const std::function<double(const Values&)>& f, const Values& x,
                   const Values& analytic, const char* what) {
  ASSERT_EQ(analytic.size(), x.size());
  double scale = 1e-3;
  for (float g : analytic) scale = std::max(scale, double{std::fabs(g)});
  for (size_t i = 0; i < x.size(); ++i) {
    const double h = 1e-2 * std::max(1.0f, std::fabs(x[i]));
    Values plus = x, minus = x;
    plus[i] = static_cast<float>(x[i] + h);
    minus[i] = static_cast<float>(x[i] - h);
    const double step = double{plus[i]} - minus[i];  // the step actually taken in float
    const double numeric = (f(plus) - f(minus)) / step;
    EXPECT_NEAR(analytic[i], numeric, 2e-3 * scale) << what << " element " << i;
  }
}

TEST(GradientTest, Activations) {
  const Shape shape{3, 5};
  // Keep |x| > 0.05 so the relu kink is not inside a finite-difference step.
  Values x = RandomValues(15, -2, 2, 1);
  for (float& v : x) v = v >= 0 ? v + 0.05f : v - 0.05f;
  const Values w = RandomValues(15, -1, 1, 2);
  const Tensor dy = Make(shape, w);
  auto forward = [&](auto op) {
    return [&, op](const Values& in) { return Dot(w, *op(Make(shape, in))->ToHost()); };
  };
  CheckGradient(forward([](const Tensor& t) { return ops::Relu(t); }), x,
                *ops::ReluGrad(dy, Make(shape, x))->ToHost(), "ReluGrad");
  const Tensor sigmoid = *ops::Sigmoid(Make(shape, x));
  CheckGradient(forward([](const Tensor& t) { return ops::Sigmoid(t); }), x,
                *ops::SigmoidGrad(dy, sigmoid)->ToHost(), "SigmoidGrad");
  const Tensor tanh = *ops::Tanh(Make(shape, x));
  CheckGradient(forward([](const Tensor& t) { return ops::Tanh(t); }), x,
                *ops::TanhGrad(dy, tanh)->ToHost(), "TanhGrad");
}

TEST(GradientTest, Softmax) {
  const Shape shape{3, 4};
  const Values x = RandomValues(12, -2, 2, 11);
  const Values w = RandomValues(12, -1, 1, 12);
  const Tensor y = *ops::Softmax(Make(shape, x));
  CheckGradient([&](const Values& in) { return Dot(w, *ops::Softmax(Make(shape, in))->ToHost()); },
                x, *ops::SoftmaxGrad(Make(shape, w), y)->ToHost(), "SoftmaxGrad");
}

TEST(GradientTest, MeanSquaredError) {
  const Shape shape{4, 3};
  const Values pred = RandomValues(12, -1, 1, 3);
  const Tensor target = Make(shape, RandomValues(12, -1, 1, 4));
  const int64_t global = 10;  // this batch is a shard of a global batch of 10
  auto f = [&](const Values& p) {
    return double{ops::MeanSquaredError(Make(shape, p), target, global)->ToHost()->at(0)};
  };
  CheckGradient(f, pred, *ops::MeanSquaredErrorGrad(Make(shape, pred), target, global)->ToHost(),
                "MeanSquaredErrorGrad");
}

TEST(GradientTest, SparseSoftmaxCrossEntropy) {
  const Shape shape{5, 4};
  const Values logits = RandomValues(20, -3, 3, 5);
  const Tensor labels = *Tensor::FromHostInt32(Cpu(), Shape{5}, std::vector<int32_t>{0, 3, 1, 2, 3});
  auto f = [&](const Values& l) {
    return double{ops::SparseSoftmaxCrossEntropy(Make(shape, l), labels, 7)->ToHost()->at(0)};
  };
  CheckGradient(f, logits,
                *ops::SparseSoftmaxCrossEntropyGrad(Make(shape, logits), labels, 7)->ToHost(),
                "SparseSoftmaxCrossEntropyGrad");
}

// Dense layer backward: for c = a·b, dA = dC·bᵀ and dB = aᵀ·dC, computed with the transpose
// flags; and the bias gradient of BiasAdd is the batch sum of dy.
TEST(GradientTest, MatMulAndBiasAddThroughTransposes) {
  const Shape a_shape{4, 3}, b_shape{3, 5}, c_shape{4, 5};
  const Values a = RandomValues(12, -1, 1, 6);
  const Values b = RandomValues(15, -1, 1, 7);
  const Values w = RandomValues(20, -1, 1, 8);
  const Tensor dc = Make(c_shape, w);
  const Values da = *ops::MatMul(dc, Make(b_shape, b), false, true)->ToHost();
  const Values db = *ops::MatMul(Make(a_shape, a), dc, true, false)->ToHost();
  CheckGradient([&](const Values& x) {
    return Dot(w, *ops::MatMul(Make(a_shape, x), Make(b_shape, b))->ToHost());
  }, a, da, "MatMul dA");
  CheckGradient([&](const Values& x) {
    return Dot(w, *ops::MatMul(Make(a_shape, a), Make(b_shape, x))->ToHost());
  }, b, db, "MatMul dB");

  const Values bias = RandomValues(5, -1, 1, 9);
  const Tensor x = Make(c_shape, RandomValues(20, -1, 1, 10));
  const Values dbias = *ops::ReduceSum(dc, ops::ReduceAxis::kBatch)->ToHost();
  CheckGradient([&](const Values& bv) {
    return Dot(w, *ops::BiasAdd(x, Make(Shape{5}, bv))->ToHost());
  }, bias, dbias, "BiasAdd dbias");
}

}  // namespace
}  // namespace tower
