// Dynamic loss scaling under data parallelism (strategy/step/loss_scale.h): an overflow on one
// replica makes every replica skip the same step, the scale halves (and may go below 1),
// the copies stay bitwise equal and training goes on; without overflows a power-of-two
// scale changes no bit of float32 training; backups carry the scale.
#include <cmath>
#include <cstring>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/testing/fake_gpu_platform.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "ops/testing/fake_gpu_kernels.h"
#include "strategy/mirrored_strategy.h"
#include "tests/testing/inject_nonfinite_layer.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::InjectNonFiniteLayer;
using testing::MakeContextWithFakeGpus;

struct Config {
  int replicas = 4;
  bool check_numerics = false;
  bool share = true;
  // The replicas batched (MirroredStrategyOptions::batch_replica_rows) in
  // `batch_threads` batches (0: one): the injecting layer then sees each batch's first
  // replica compute every member's rows.
  bool batch = false;
  int batch_threads = 0;
  PrecisionPolicy policy = PrecisionPolicy::kFloat32;
  std::optional<LossScaleOptions> scaling = LossScaleOptions{1024, 4};
  int inject_replica = -1;  // local replica whose gradient overflows at `inject_steps`
  std::set<int> inject_steps;
  int steps = 16;
};

// After each step: the loss scale, the optimizer's counter, every variable's values.
struct StepRecord {
  float scale = 0;
  int64_t iterations = 0;
  std::vector<std::vector<float>> weights;
};

// Trains config.steps steps; the first error ends it (returned with the records so far).
std::vector<StepRecord> Train(const Config& config, Status* error = nullptr) {
  auto context = MakeContextWithFakeGpus({});
  TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0],
      std::vector<LogicalDeviceConfiguration>(config.replicas)));
  ScopedDefaultContext use(*context);
  MirroredStrategyOptions options;
  options.context = context.get();
  options.share_variables = config.share;
  options.batch_replica_rows = config.batch;
  options.batch_threads = config.batch_threads;
  std::unique_ptr<MirroredStrategy> strategy = std::move(MirroredStrategy::Create(options)).value();
  Sequential model({Dense(32, "tanh"), Dense(16, "relu"),
                    std::make_shared<InjectNonFiniteLayer>(config.inject_replica,
                                                           config.inject_steps),
                    Dense(1)},
                   11);
  {
    auto scope = strategy->Scope();
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), Adam(0.003f)));
  }
  TOWER_CHECK_OK(model.SetPrecisionPolicy(config.policy));
  TOWER_CHECK_OK(model.SetLossScaling(config.scaling));
  model.set_check_numerics(config.check_numerics);
  data::SyntheticOptions synthetic;
  synthetic.name = "mlp";
  synthetic.rows = 24 * config.steps;
  synthetic.seed = 5;
  auto batches = std::move(data::Dataset::Synthetic(synthetic)->Batch(24).MakeIterator()).value();
  std::vector<StepRecord> records;
  while (true) {
    std::optional<data::Batch> batch = std::move(batches->Next()).value();
    if (!batch.has_value()) break;
    StatusOr<double> loss = model.TrainStep(*batch);
    if (error != nullptr && !loss.ok()) {
      *error = loss.status();
      return records;
    }
    TOWER_CHECK_OK(loss.status());
    EXPECT_TRUE(std::isfinite(*loss)) << "step " << records.size() + 1;
    StepRecord record;
    record.scale = model.loss_scale() != nullptr ? model.loss_scale()->scale() : 0;
    record.iterations = model.optimizer()->iterations();
    std::vector<Variable*> all = model.trainable_variables();
    for (Variable* slot : model.optimizer()->slots()) all.push_back(slot);
    for (Variable* variable : all) {
      record.weights.push_back(*variable->Read());
      for (int r = 1; r < variable->num_replicas(); ++r) {
        EXPECT_EQ(*variable->value(r).ToHost(), record.weights.back())
            << variable->name() << " of replica " << r << " after step " << records.size() + 1;
      }
    }
    records.push_back(std::move(record));
  }
  return records;
}

bool SameBits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t v = 0; v < a.size(); ++v) {
    if (a[v].size() != b[v].size() ||
        std::memcmp(a[v].data(), b[v].data(), a[v].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

TEST(LossScalingTest, AnOverflowOnOneReplicaSkipsTheStepEverywhereAndHalvesTheScale) {
  // (share, batches): 0 batches is unbatched.
  for (const auto [share, batches] : {std::pair{true, 0}, {true, 2}, {true, 1}, {false, 0}}) {
    const bool batch = batches > 0;
    Config config;
    config.policy = PrecisionPolicy::kMixedFloat16;
    config.share = share;
    config.batch = batch;
    config.batch_threads = batches;
    // In 2 batches, replica 1 computes the rows of 3 as well (on 2 cores); in one, replica 0
    // computes every replica's.
    config.inject_replica = batches == 2 ? 1 : batches == 1 ? 0 : 2;
    config.inject_steps = {10};
    const std::vector<StepRecord> run = Train(config);
    ASSERT_EQ(run.size(), 16u);
    // Scale 1024, doubling after every 4 good steps: 2048 after step 4, 4096 after 8;
    // step 10 overflows: 2048, the count restarts; 4096 again after step 14.
    const float want[] = {1024, 1024, 1024, 2048, 2048, 2048, 2048, 4096,
                          4096, 2048, 2048, 2048, 2048, 4096, 4096, 4096};
    for (size_t s = 0; s < run.size(); ++s) {
      EXPECT_EQ(run[s].scale, want[s]) << "after step " << s + 1 << (share ? " (shared)" : "") << (batch ? " (batched)" : "");
      // The skipped step is no update: the counter and every weight and slot stay.
      EXPECT_EQ(run[s].iterations, s < 9 ? static_cast<int64_t>(s + 1)
                                         : static_cast<int64_t>(s)) << "after step " << s + 1;
    }
    EXPECT_TRUE(SameBits(run[9].weights, run[8].weights)) << "step 10 changed the weights";
    EXPECT_FALSE(SameBits(run[10].weights, run[9].weights)) << "training stopped after step 10";
  }
}

TEST(LossScalingTest, WithoutOverflowAPowerOfTwoScaleChangesNoBitOfFloat32Training) {
  Config scaled;
  Config plain;
  plain.scaling = std::nullopt;
  const std::vector<StepRecord> a = Train(scaled);
  const std::vector<StepRecord> b = Train(plain);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_TRUE(SameBits(a.back().weights, b.back().weights));
  EXPECT_EQ(a.back().scale, 1024.0f * 16);  // 16 good steps, doubling every 4
}

TEST(LossScalingTest, TheScaleGoesBelowOneAndTrainingGoesOn) {
  Config config;
  config.replicas = 2;
  config.scaling = LossScaleOptions{4, 1000};
  config.inject_replica = 1;
  config.inject_steps = {1, 2, 3, 4, 5, 6};  // 4 → 2 → 1 → 0.5 → 0.25 → 0.125 → 0.0625
  const std::vector<StepRecord> run = Train(config);
  EXPECT_EQ(run[5].scale, 0.0625f);
  EXPECT_EQ(run[5].iterations, 0);
  EXPECT_EQ(run.back().iterations, 10);  // the 10 steps after the overflows all updated
  EXPECT_FALSE(SameBits(run.back().weights, run[5].weights));
}

TEST(LossScalingTest, CheckpointsCarryTheScaleAndItsCount) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/scaled.safetensors";
  data::SyntheticOptions synthetic;
  synthetic.name = "linreg";
  synthetic.rows = 32 * 7;
  auto batches = std::move(data::Dataset::Synthetic(synthetic)->Batch(32).MakeIterator()).value();
  Sequential trained({Dense(1)});
  TOWER_CHECK_OK(trained.Compile(MeanSquaredErrorLoss(), SGD(0.1f)));
  TOWER_CHECK_OK(trained.SetLossScaling(LossScaleOptions{64, 4}));
  for (int step = 0; step < 7; ++step) {
    TOWER_CHECK_OK(trained.TrainStep(*std::move(batches->Next()).value()).status());
  }
  // 7 good steps: doubled once after 4, 3 good steps since.
  ASSERT_EQ(trained.loss_scale()->scale(), 128);
  ASSERT_EQ(trained.loss_scale()->good_steps(), 3);
  TOWER_CHECK_OK(trained.SaveWeights(path));
  Sequential restored({Dense(1)});
  TOWER_CHECK_OK(restored.Compile(MeanSquaredErrorLoss(), SGD(0.1f)));
  TOWER_CHECK_OK(restored.SetLossScaling(LossScaleOptions{64, 4}));
  TOWER_CHECK_OK(restored.LoadWeights(path));
  EXPECT_EQ(restored.loss_scale()->scale(), 128);
  EXPECT_EQ(restored.loss_scale()->good_steps(), 3);
  EXPECT_EQ(restored.optimizer()->iterations(), 7);
  // A model without loss scaling refuses the scale's tensors instead of dropping them.
  Sequential plain({Dense(1)});
  TOWER_CHECK_OK(plain.Compile(MeanSquaredErrorLoss(), SGD(0.1f)));
  EXPECT_THAT(plain.LoadWeights(path).message(), HasSubstr("optimizer.loss_scale"));
}

TEST(LossScalingTest, CheckNumericsNamesTheReplicaAndTheTensorThatOverflowedFirst) {
  // With check-numerics an overflow stops the run (even under loss scaling, which would
  // have skipped the step), naming the replica whose own gradient overflowed before the
  // all-reduce spread it to everyone, and which gradient. Every replica fails alike.
  for (int replica : {0, 2}) {
    Config config;
    config.policy = PrecisionPolicy::kMixedFloat16;
    config.check_numerics = true;
    config.inject_replica = replica;
    config.inject_steps = {3};
    Status error;
    const std::vector<StepRecord> run = Train(config, &error);
    EXPECT_EQ(run.size(), 2u);
    EXPECT_THAT(error.message(),
                HasSubstr("check-numerics: global step 3: replica " + std::to_string(replica) +
                          " of 4 was first: the gradient of layers.1.kernel (layer Dense(16, "
                          "relu)) has "));  // Inf, or NaN where the Inf met a zero
    EXPECT_THAT(error.message(), HasSubstr("in its own values, before the all-reduce"));
  }
}

TEST(LossScalingTest, BadOptionsAreRefused) {
  EXPECT_THAT(DynamicLossScale::Create({3, 10}).status().message(),
              HasSubstr("must be a power of two"));
  EXPECT_THAT(DynamicLossScale::Create({0, 10}).status().message(),
              HasSubstr("must be a power of two"));
  EXPECT_THAT(DynamicLossScale::Create({8, 0}).status().message(),
              HasSubstr("growth interval must be at least 1"));
}

}  // namespace
}  // namespace tower
