// Losses (global-batch reduction, target preparation), optimizers against steps computed by
// hand, learning-rate schedules, metrics.
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/context.h"
#include "model/learning_rate_schedule.h"
#include "model/loss.h"
#include "model/metrics.h"
#include "model/optimizer.h"

namespace tower {
namespace {

using ::testing::HasSubstr;

Device* Cpu() { return *Context::Global().FindDevice("/CPU:0"); }
Tensor Host(const Shape& shape, const std::vector<float>& values) {
  return *Tensor::FromHost(Cpu(), shape, values);
}
float Scalar(const StatusOr<Tensor>& t) { return t->ToHost()->at(0); }

TEST(LossTest, MseReducesOverTheGlobalBatch) {
  auto mse = MeanSquaredErrorLoss();
  const Tensor pred = Host(Shape{2, 1}, {1, 3});
  const Tensor target = Host(Shape{2, 1}, {0, 1});
  // Σ (p − t)² = 1 + 4 = 5; over a global batch of 2: 2.5; of 10 (this is a shard): 0.5.
  EXPECT_FLOAT_EQ(Scalar(mse->Value(pred, target, 2)), 2.5f);
  EXPECT_FLOAT_EQ(Scalar(mse->Value(pred, target, 10)), 0.5f);
  EXPECT_EQ(*mse->Gradient(pred, target, 10)->ToHost(), (std::vector<float>{0.2f, 0.4f}));
  // Two shards of a batch of 4 sum to the whole batch's loss.
  const Tensor p4 = Host(Shape{4, 1}, {1, 3, -1, 2});
  const Tensor t4 = Host(Shape{4, 1}, {0, 1, 1, 2});
  const float whole = Scalar(mse->Value(p4, t4, 4));
  const float first = Scalar(mse->Value(*p4.Slice(0, 2), *t4.Slice(0, 2), 4));
  const float second = Scalar(mse->Value(*p4.Slice(2, 4), *t4.Slice(2, 4), 4));
  EXPECT_FLOAT_EQ(first + second, whole);
  EXPECT_THAT(mse->CheckShapes(2, 1).message(), HasSubstr("2 outputs but the data has 1 targets"));
}

TEST(LossTest, CrossEntropyTargetsMustBeClassIds) {
  auto ce = SparseCategoricalCrossentropyLoss();
  EXPECT_TRUE(ce->CheckShapes(3, 1).ok());
  EXPECT_THAT(ce->CheckShapes(3, 2).message(), HasSubstr("needs one target column"));
  EXPECT_THAT(ce->CheckShapes(1, 1).message(), HasSubstr("at least 2"));
  const float good[] = {0, 2, 1};
  StatusOr<Tensor> labels = ce->PrepareTargets(Cpu(), good, 3, 1, 3, nullptr);
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ(*labels->ToHostInt32(), (std::vector<int32_t>{0, 2, 1}));
  const float fractional[] = {0, 1.5f};
  const int64_t rows[] = {40, 41};
  EXPECT_THAT(ce->PrepareTargets(Cpu(), fractional, 2, 1, 3, rows).status().message(),
              HasSubstr("row 41: target 1.500000 is not a class id in [0, 3)"));
  const float out_of_range[] = {3};
  EXPECT_FALSE(ce->PrepareTargets(Cpu(), out_of_range, 1, 1, 3, nullptr).ok());
  // The loss of uniform logits is log(classes).
  const Tensor logits = Host(Shape{2, 3}, {0, 0, 0, 5, 5, 5});
  EXPECT_NEAR(Scalar(ce->Value(logits, *labels->Slice(0, 2), 2)), std::log(3.0), 1e-6);
  EXPECT_THAT(LossFromName("hinge").status().message(), HasSubstr("unknown loss 'hinge'"));
  EXPECT_EQ((*LossFromName("mse"))->name(), "mean_squared_error");
}

// One weight w = 1 and a constant gradient g = 0.5, stepped by hand.
std::vector<float> Steps(Optimizer& optimizer, int steps) {
  Variable w("w", {Host(Shape{1}, {1.0f})});
  std::vector<Variable*> vars = {&w};
  TOWER_CHECK_OK(optimizer.Build(vars));
  std::vector<float> values;
  for (int i = 0; i < steps; ++i) {
    TOWER_CHECK_OK(optimizer.Apply(0, optimizer.iterations(), vars, {Host(Shape{1}, {0.5f})}));
    optimizer.set_iterations(optimizer.iterations() + 1);
    values.push_back(w.Read()->at(0));
  }
  return values;
}

TEST(OptimizerTest, SgdMomentumNesterovByHand) {
  auto sgd = SGD(0.1f);
  std::vector<float> plain = Steps(*sgd, 2);
  EXPECT_FLOAT_EQ(plain[0], 0.95f);
  EXPECT_FLOAT_EQ(plain[1], 0.90f);
  EXPECT_TRUE(sgd->slots().empty());
  // v1 = −0.05, w1 = 0.95; v2 = 0.9·(−0.05) − 0.05 = −0.095, w2 = 0.855.
  auto momentum = SGD(0.1f, 0.9f);
  std::vector<float> m = Steps(*momentum, 2);
  EXPECT_FLOAT_EQ(m[0], 0.95f);
  EXPECT_FLOAT_EQ(m[1], 0.855f);
  EXPECT_EQ(momentum->slots()[0]->name(), "optimizer.w.velocity");
  // Nesterov: w += 0.9·v − 0.05 → w1 = 1 − 0.045 − 0.05 = 0.905; v2 = −0.095,
  // w2 = 0.905 − 0.0855 − 0.05 = 0.7695.
  auto nesterov = SGD(0.1f, 0.9f, true);
  std::vector<float> n = Steps(*nesterov, 2);
  EXPECT_FLOAT_EQ(n[0], 0.905f);
  EXPECT_NEAR(n[1], 0.7695f, 1e-6);
}

TEST(OptimizerTest, AdamByHand) {
  auto adam = Adam(0.1f);
  std::vector<float> w = Steps(*adam, 3);
  // With a constant gradient, m_t/√v_t is bias-corrected to exactly g/|g| each step, so
  // Adam moves by the learning rate (up to ε): 0.9, 0.8, 0.7.
  double expected = 1.0, m = 0, v = 0;
  for (int t = 1; t <= 3; ++t) {
    m = 0.9 * m + 0.1 * 0.5;
    v = 0.999 * v + 0.001 * 0.25;
    const double alpha = 0.1 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    expected -= alpha * m / (std::sqrt(v) + 1e-7);
    EXPECT_NEAR(w[t - 1], expected, 1e-6) << "step " << t;
    EXPECT_NEAR(w[t - 1], 1.0 - 0.1 * t, 1e-5);
  }
  ASSERT_EQ(adam->slots().size(), 2u);
  EXPECT_EQ(adam->slots()[0]->name(), "optimizer.w.m");
  EXPECT_EQ(adam->slots()[1]->name(), "optimizer.w.v");
}

TEST(OptimizerTest, SchedulesDriveTheRate) {
  auto sgd = SGD(1.0f);
  sgd->set_schedule(*PiecewiseConstant({1}, {0.1f, 0.01f}));
  std::vector<float> w = Steps(*sgd, 3);  // steps of 0.05, then 0.005
  EXPECT_FLOAT_EQ(w[0], 0.95f);
  EXPECT_FLOAT_EQ(w[1], 0.945f);
  EXPECT_NEAR(w[2], 0.94f, 1e-6);
  auto decay = *ExponentialDecay(1.0f, 10, 0.5f, /*staircase=*/true);
  EXPECT_FLOAT_EQ((*decay)(9), 1.0f);
  EXPECT_FLOAT_EQ((*decay)(10), 0.5f);
  EXPECT_FLOAT_EQ((*decay)(25), 0.25f);
  auto smooth = *ExponentialDecay(1.0f, 10, 0.5f);
  EXPECT_NEAR((*smooth)(5), std::sqrt(0.5), 1e-6);
  auto lambda = LambdaSchedule([](int64_t step) { return 1.0f / (step + 1); });
  EXPECT_FLOAT_EQ((*lambda)(3), 0.25f);
  EXPECT_FALSE(PiecewiseConstant({5, 2}, {1, 2, 3}).ok());
  EXPECT_FALSE(PiecewiseConstant({5}, {1}).ok());
  EXPECT_FALSE(ExponentialDecay(1, 0, 0.5f).ok());
}

TEST(MetricsTest, MeanAbsoluteAndSquaredErrorAndAccuracy) {
  auto mae = *MetricFromName("mae");
  auto mse = *MetricFromName("mean_squared_error");
  const float pred[] = {1, 2, 3, 4};
  const float target[] = {1, 0, 3, 8};
  mae->Update(pred, target, 2, 2, 2);
  mse->Update(pred, target, 2, 2, 2);
  EXPECT_DOUBLE_EQ(mae->Result(), 6.0 / 4);
  EXPECT_DOUBLE_EQ(mse->Result(), 20.0 / 4);
  mae->Update(pred, pred, 2, 2, 2);  // 4 more samples with zero error
  EXPECT_DOUBLE_EQ(mae->Result(), 6.0 / 8);
  mae->Reset();
  EXPECT_TRUE(std::isnan(mae->Result()));
  auto accuracy = *MetricFromName("accuracy");
  const float logits[] = {0.1f, 0.9f, 0.0f, 2.0f, 1.0f, 0.5f};  // argmax 1, 0
  const float labels[] = {1, 2};
  accuracy->Update(logits, labels, 2, 3, 1);
  EXPECT_DOUBLE_EQ(accuracy->Result(), 0.5);
  EXPECT_THAT(MetricFromName("auc").status().message(), HasSubstr("unknown metric 'auc'"));
}

}  // namespace
}  // namespace tower
