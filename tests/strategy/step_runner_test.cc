// StepRunner alone, over a model that is not Sequential: a least-squares model written here
// against the StepModel contract (strategy/step/step_model.h), computed on the host. What the
// runner owns (shards, micro-batches, the reducer, loss scaling, check-numerics across
// replicas) is checked against closed-form sums computed in double by the test, independent
// of the runner and of the model's own arithmetic.
#include "strategy/step/step_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "device/testing/fake_gpu_platform.h"
#include "strategy/mirrored_strategy.h"
#include "util/logging.h"

namespace tower {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kInDim = 3;

// y = x · w (w: [kInDim, 1], one variable), loss = Σ rows (y − t)² / loss_rows. Every local
// replica holds its own copy of w; Update applies plain SGD. `poison_replica` ≥ 0: that
// replica's gradient is `poison` (NaN or Inf) on the step whose iteration is poison_step.
class LeastSquares final : public StepModel {
 public:
  LeastSquares(int replicas, float lr)
      : weights_(replicas, std::vector<float>(kInDim, 0.0f)), lr_(lr) {}

  GradientLayout Gradients() const override { return GradientLayout{bytes_, variable_}; }

  StatusOr<Tensor> PrepareTargets(Device* device, const float* targets, int64_t rows,
                                  int64_t target_dim, const int64_t*) const override {
    return Tensor::FromHost(device, Shape{rows, target_dim},
                            std::vector<float>(targets, targets + rows * target_dim));
  }

  Status ForwardBackward(int replica, const Tensor& features, const PassOptions& options,
                         ReplicaPass* pass) override {
    ++passes_;
    TOWER_ASSIGN_OR_RETURN(std::vector<float> x, features.ToHost());
    const int64_t rows = features.shape().dim(0);
    const std::vector<float>& w = weights_[replica];
    std::vector<float> y(static_cast<size_t>(rows), 0.0f);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t k = 0; k < kInDim; ++k) y[i] += x[i * kInDim + k] * w[k];
    }
    Device* device = features.device();
    TOWER_ASSIGN_OR_RETURN(pass->outputs, Tensor::FromHost(device, Shape{rows, 1}, y));
    if (options.targets == nullptr) return OkStatus();
    TOWER_ASSIGN_OR_RETURN(std::vector<float> t, options.targets->ToHost());
    float loss = 0;
    std::vector<float> gradient(kInDim, 0.0f);
    for (int64_t i = 0; i < rows; ++i) {
      const float error = y[i] - t[i];
      loss += error * error;
      for (int64_t k = 0; k < kInDim; ++k) gradient[k] += 2 * error * x[i * kInDim + k];
    }
    const float n = static_cast<float>(options.loss_rows);
    TOWER_ASSIGN_OR_RETURN(pass->loss, Tensor::FromHost(device, Shape{1}, {loss / n}));
    if (!options.backward) return OkStatus();
    for (float& g : gradient) g = g * options.loss_scale / n;
    if (replica == poison_replica && iteration_ == poison_step) gradient[1] = poison;
    pass->gradients.resize(1);
    TOWER_ASSIGN_OR_RETURN(pass->gradients[0],
                           Tensor::FromHost(device, Shape{kInDim, 1}, gradient));
    if (options.sink == nullptr) return OkStatus();
    TOWER_ASSIGN_OR_RETURN(Span<Tensor* const> into, options.sink->AddInto(0, 1));
    if (!into.empty()) return InternalError("this model does not add into running sums");
    return options.sink->Take(&pass->gradients[0]);
  }

  Status Update(int replica, int64_t iteration, const std::vector<Tensor>& gradients,
                int) override {
    ++updates_;
    TOWER_ASSIGN_OR_RETURN(std::vector<float> g, gradients[0].ToHost());
    for (int64_t k = 0; k < kInDim; ++k) weights_[replica][k] -= lr_ * g[k];
    return OkStatus();
  }
  StatusOr<bool> PrepareSliceUpdates(int64_t) override { return false; }
  void UpdateSlice(int, size_t, int64_t, int64_t, const float*) const override {}
  std::string DescribeGradient(size_t gradient) const override {
    return "the gradient of w" + std::to_string(gradient);
  }
  void SetWeightsVersion(uint64_t) override {}

  const std::vector<float>& weights(int replica) const { return weights_[replica]; }
  int passes() const { return passes_; }
  int updates() const { return updates_; }

  int64_t iteration_ = 0;  // set by the test before each step
  int poison_replica = -1;
  int64_t poison_step = -1;
  float poison = std::numeric_limits<float>::quiet_NaN();

 private:
  std::vector<std::vector<float>> weights_;
  float lr_;
  const int64_t bytes_[1] = {kInDim * 4};
  const size_t variable_[1] = {0};
  int passes_ = 0;
  int updates_ = 0;
};

// A global batch of `rows` rows: x[i][k] = sin(1 + 7i + 3k), t[i] = cos(2i) (no pattern a
// wrong shard or a lost row could keep).
data::Batch MakeBatch(int64_t rows, int step) {
  data::Batch batch;
  batch.rows = rows;
  batch.feature_dim = kInDim;
  batch.target_dim = 1;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < kInDim; ++k) {
      batch.features.push_back(static_cast<float>(std::sin(1.0 + 7 * i + 3 * k + step)));
    }
    batch.targets.push_back(static_cast<float>(std::cos(2.0 * i + step)));
  }
  return batch;
}

// The reference: the same SGD steps on the whole global batch, in double.
std::vector<double> ReferenceWeights(int steps, int64_t rows, double lr,
                                     std::vector<double>* losses) {
  std::vector<double> w(kInDim, 0.0);
  for (int s = 0; s < steps; ++s) {
    const data::Batch batch = MakeBatch(rows, s);
    std::vector<double> g(kInDim, 0.0);
    double loss = 0;
    for (int64_t i = 0; i < rows; ++i) {
      double y = 0;
      for (int64_t k = 0; k < kInDim; ++k) y += batch.features[i * kInDim + k] * w[k];
      const double error = y - batch.targets[i];
      loss += error * error / rows;
      for (int64_t k = 0; k < kInDim; ++k)
        g[k] += 2 * error * batch.features[i * kInDim + k] / rows;
    }
    if (losses != nullptr) losses->push_back(loss);
    for (int64_t k = 0; k < kInDim; ++k) w[k] -= lr * g[k];
  }
  return w;
}

struct ReplicaSetup {
  std::unique_ptr<Context> context;
  std::unique_ptr<MirroredStrategy> strategy;
};

ReplicaSetup Replicas(int replicas) {
  ReplicaSetup setup;
  setup.context = testing::MakeContextWithLogicalCpus(replicas);
  MirroredStrategyOptions options;
  options.context = setup.context.get();
  options.share_variables = false;  // a copy of w per replica, as on GPUs
  options.fold_replica_gradients = false;
  StatusOr<std::unique_ptr<MirroredStrategy>> strategy = MirroredStrategy::Create(options);
  TOWER_CHECK_OK(strategy.status());
  setup.strategy = std::move(strategy).value();
  return setup;
}

// A request for `batch` as step `iteration` (training) or an evaluation.
StepRequest Request(const data::Batch& batch, bool training, int64_t iteration = 0) {
  StepRequest request;
  request.batch = &batch;
  request.training = training;
  request.in_dim = kInDim;
  request.out_dim = 1;
  request.iteration = iteration;
  return request;
}

// Runs `steps` training steps of 10-row global batches; the losses come back.
std::vector<double> Train(StepRunner& runner, LeastSquares& model, Distribution& dist, int steps) {
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    const data::Batch batch = MakeBatch(10, s);
    const StepRequest request = Request(batch, /*training=*/true, s);
    model.iteration_ = s;
    StatusOr<StepResult> result = runner.Run(dist, request);
    EXPECT_TRUE(result.ok()) << result.status().message();
    if (!result.ok()) break;
    losses.push_back(result->loss);
  }
  return losses;
}

// Relative agreement that fails on NaN.
void ExpectNear(double actual, double expected, double relative) {
  EXPECT_TRUE(std::abs(actual - expected) <= relative * std::max(1.0, std::abs(expected)))
      << actual << " vs " << expected;
}

TEST(StepRunnerTest, EveryReplicaCountTrainsAsTheWholeBatchInDouble) {
  std::vector<double> reference_losses;
  const std::vector<double> reference = ReferenceWeights(4, 10, 0.1, &reference_losses);
  for (int replicas : {1, 2, 3, 4}) {
    SCOPED_TRACE(std::to_string(replicas) + " replicas");
    ReplicaSetup setup = Replicas(replicas);
    LeastSquares model(replicas, 0.1f);
    StepRunner runner(model);
    const std::vector<double> losses = Train(runner, model, setup.strategy->extended(), 4);
    ASSERT_EQ(losses.size(), 4u);
    for (int s = 0; s < 4; ++s) ExpectNear(losses[s], reference_losses[s], 1e-5);
    for (int r = 0; r < replicas; ++r) {
      for (int64_t k = 0; k < kInDim; ++k) ExpectNear(model.weights(r)[k], reference[k], 1e-5);
    }
    // One pass and one update per replica per step: the runner neither skips nor repeats.
    EXPECT_EQ(model.passes(), 4 * replicas);
    EXPECT_EQ(model.updates(), 4 * replicas);
  }
}

TEST(StepRunnerTest, MicroBatchesGiveTheStepOfTheWholeBatch) {
  const std::vector<double> reference = ReferenceWeights(3, 10, 0.1, nullptr);
  ReplicaSetup setup = Replicas(2);
  LeastSquares model(2, 0.1f);
  StepRunner runner(model);
  runner.settings().micro_batches = 2;
  Train(runner, model, setup.strategy->extended(), 3);
  for (int64_t k = 0; k < kInDim; ++k) ExpectNear(model.weights(1)[k], reference[k], 1e-5);
  EXPECT_EQ(model.passes(), 3 * 2 * 2);  // steps × replicas × micro-batches
  EXPECT_EQ(model.updates(), 3 * 2);
}

TEST(StepRunnerTest, LossScalingSkipsAStepWhoseSumIsNotFiniteAndHalvesTheScale) {
  ReplicaSetup setup = Replicas(2);
  LeastSquares model(2, 0.1f);
  model.poison_replica = 1;
  model.poison_step = 1;
  model.poison = std::numeric_limits<float>::infinity();
  StepRunner runner(model);
  LossScaleOptions options;
  options.initial_scale = 1024;
  StatusOr<DynamicLossScale> scale = DynamicLossScale::Create(options);
  ASSERT_TRUE(scale.ok());
  runner.settings().loss_scale = *scale;
  std::vector<float> before;
  for (int s = 0; s < 3; ++s) {
    if (s == 1) before = model.weights(0);
    const data::Batch batch = MakeBatch(10, s);
    const StepRequest request = Request(batch, /*training=*/true, s);
    model.iteration_ = s;
    StatusOr<StepResult> result = runner.Run(setup.strategy->extended(), request);
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_EQ(result->applied, s != 1) << "step " << s;
    EXPECT_EQ(result->loss_scale, s <= 1 ? 1024.0f : 512.0f) << "step " << s;
    if (s == 1) {
      // Skipped on every replica alike: no update, the weights as they were.
      EXPECT_EQ(model.weights(0), before);
      EXPECT_EQ(model.weights(1), before);
    }
  }
  EXPECT_EQ(runner.settings().loss_scale->scale(), 512.0f);
  // The scaled gradients were unscaled exactly: the two applied steps are those of plain SGD
  // on steps 0 and 2.
  EXPECT_EQ(model.updates(), 2 * 2);
}

TEST(StepRunnerTest, CheckNumericsNamesTheFirstReplicaWhoseOwnGradientWasNotFinite) {
  ReplicaSetup setup = Replicas(3);
  LeastSquares model(3, 0.1f);
  model.poison_replica = 2;
  model.poison_step = 0;
  StepRunner runner(model);
  runner.settings().check_numerics = true;
  const data::Batch batch = MakeBatch(9, 0);
  const StepRequest request = Request(batch, /*training=*/true);
  StatusOr<StepResult> result = runner.Run(setup.strategy->extended(), request);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("replica 2 of 3 was first"));
  EXPECT_THAT(result.status().message(), HasSubstr("the gradient of w0 has NaN"));
  EXPECT_EQ(model.updates(), 0);
}

TEST(StepRunnerTest, EvaluationComputesTheLossAndEveryRowsPredictionWithoutAnUpdate) {
  ReplicaSetup setup = Replicas(2);
  LeastSquares model(2, 0.1f);
  StepRunner runner(model);
  Train(runner, model, setup.strategy->extended(), 1);  // nonzero weights
  const std::vector<float> w = model.weights(0);
  const data::Batch batch = MakeBatch(7, 5);
  std::vector<float> predictions;
  StepRequest request = Request(batch, /*training=*/false);
  request.predictions = &predictions;
  StatusOr<StepResult> result = runner.Run(setup.strategy->extended(), request);
  ASSERT_TRUE(result.ok()) << result.status().message();
  double loss = 0;
  ASSERT_EQ(predictions.size(), 7u);
  for (int64_t i = 0; i < 7; ++i) {
    double y = 0;
    for (int64_t k = 0; k < kInDim; ++k)
      y += static_cast<double>(batch.features[i * kInDim + k]) * w[k];
    ExpectNear(predictions[i], y, 1e-6);
    loss += (y - batch.targets[i]) * (y - batch.targets[i]) / 7;
  }
  ExpectNear(result->loss, loss, 1e-5);
  EXPECT_EQ(model.weights(0), w);
  EXPECT_EQ(model.updates(), 2);  // the training step's only
}

}  // namespace
}  // namespace tower
