// Replicas that share their variables pack each weight once per step for all their products,
// on every thread (Sequential::set_share_weight_packing, ops/cpu/shared_packing.h): how often
// a step packs and reuses, the bits of packing per product, the setups that do not share (one
// replica, a copy of the variables per replica, the switch off), and deterministic mode with
// uneven shards.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "device/testing/fake_gpu_platform.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "ops/cpu/shared_packing.h"
#include "strategy/mirrored_strategy.h"

namespace tower {
namespace {

struct TrainedRun {
  std::vector<std::vector<float>> weights;
  std::vector<double> losses;
  int64_t packed = 0;  // products that packed a weight, and that reused one, in the run
  int64_t reused = 0;
};

struct TrainSetup {
  int replicas = 4;
  int threads = 2;
  bool share_variables = true;
  bool share_packing = true;
  int virtual_shards = 0;  // deterministic mode's shards (0: off)
  int batch = 64;          // rows per global batch, of 6 × 64
  bool deep = false;       // 4 hidden layers instead of 2
  // Fibers of a thread batched: off, so that every replica multiplies by the weights.
  bool batch_replicas = false;
};

// 256 → 320 → 256 → 1: the first two kernels (and the second's transpose, for the input
// gradient) are large enough to keep packed; the last is not. 6 batches of 64 rows, 2 epochs:
// 12 steps, every replica's shard the same size.
constexpr int kSteps = 12;
constexpr int kPackedPerStep = 3;  // x·W1, h·W2 and dz·W2ᵀ
// The deep model, 256 → 320 → 320 → 320 → 256 → 1: 4 kernels to keep packed, 3 of them also
// transposed (the first layer computes no input gradient). A step keeps all 7 only if the
// process keeps as many packed weights (a 4-hidden-layer `mlp` is as deep).
constexpr int kDeepPackedPerStep = 7;
static_assert(kDeepPackedPerStep <= cpu::kMaxPackedWeights);

TrainedRun Train(const TrainSetup& setup) {
  auto context = testing::MakeContextWithLogicalCpus(setup.replicas);
  ScopedDefaultContext use(*context);
  std::vector<std::shared_ptr<Layer>> layers = {Dense(320, "relu"), Dense(256, "relu"), Dense(1)};
  if (setup.deep) {
    layers = {Dense(320, "relu"), Dense(320, "relu"), Dense(320, "relu"), Dense(256, "relu"),
              Dense(1)};
  }
  Sequential model(std::move(layers), 3);
  MirroredStrategyOptions options;
  options.context = context.get();
  options.replica_threads = setup.threads;
  options.share_variables = setup.share_variables;
  options.virtual_shards = setup.virtual_shards;
  options.batch_replica_rows = setup.batch_replicas;
  std::unique_ptr<MirroredStrategy> strategy = std::move(MirroredStrategy::Create(options)).value();
  {
    auto scope = strategy->Scope();
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.001f, 0.9f)));
  }
  model.set_share_weight_packing(setup.share_packing);
  data::SyntheticOptions data;
  data.name = "mlp";
  data.rows = 6 * 64;
  data.seed = 9;
  FitOptions fit;
  fit.epochs = 2;
  fit.verbose = 0;
  const cpu::SharedPackingCounts before = cpu::SharedPackingCountsSoFar();
  StatusOr<History> history = model.Fit(data::Dataset::Synthetic(data)->Batch(setup.batch), fit);
  TOWER_CHECK_OK(history.status());
  const cpu::SharedPackingCounts after = cpu::SharedPackingCountsSoFar();
  TrainedRun run;
  for (Variable* variable : model.trainable_variables()) {
    run.weights.push_back(*variable->Read());
  }
  run.losses = history->values("loss");
  run.packed = after.packed - before.packed;
  run.reused = after.reused - before.reused;
  return run;
}

TEST(SharedWeightPackingTest, AStepPacksEachWeightOnceWithTheBitsOfPackingPerProduct) {
  const struct {
    int replicas, threads;
  } setups[] = {{2, 2}, {4, 1}, {4, 2}, {8, 1}, {8, 2}};
  for (const auto& s : setups) {
    TrainSetup setup;
    setup.replicas = s.replicas;
    setup.threads = s.threads;
    const TrainedRun shared = Train(setup);
    setup.share_packing = false;
    const TrainedRun apart = Train(setup);
    EXPECT_EQ(shared.weights, apart.weights) << s.replicas << " on " << s.threads;
    EXPECT_EQ(shared.losses, apart.losses) << s.replicas << " on " << s.threads;
    ASSERT_FALSE(shared.losses.empty());
    EXPECT_TRUE(std::isfinite(shared.losses.back()));
    // One packing of each large weight per step, whichever threads pack its blocks; every
    // other replica's product reuses it.
    const int64_t packings = int64_t{kSteps} * kPackedPerStep;
    EXPECT_EQ(shared.packed, packings) << s.replicas << " on " << s.threads;
    EXPECT_EQ(shared.reused, packings * (s.replicas - 1)) << s.replicas << " on " << s.threads;
    EXPECT_EQ(apart.packed + apart.reused, 0) << s.replicas << " on " << s.threads;
  }
}

// A deep model's step multiplies by 7 weights worth packing: the process keeps all of them, so
// each is packed once per step and reused by every other replica, none left to Eigen's path
// for want of an entry (with 4 entries, 3 of the 7 were: 19-26 % slower at 4 and 8 replicas).
TEST(SharedWeightPackingTest, ADeepModelKeepsEveryWeightItPacks) {
  for (const int replicas : {2, 4}) {
    TrainSetup setup;
    setup.replicas = replicas;
    setup.deep = true;
    const TrainedRun shared = Train(setup);
    setup.share_packing = false;
    const TrainedRun apart = Train(setup);
    EXPECT_EQ(shared.weights, apart.weights) << replicas;
    ASSERT_FALSE(shared.losses.empty());
    EXPECT_TRUE(std::isfinite(shared.losses.back()));
    const int64_t packings = int64_t{kSteps} * kDeepPackedPerStep;
    EXPECT_EQ(shared.packed, packings) << replicas;
    EXPECT_EQ(shared.reused, packings * (replicas - 1)) << replicas;
  }
}

// Deterministic mode's virtual shards and a last batch of another size give a thread products
// of several row counts per weight and step, more than its cache keeps: packings come and go,
// and the bits stay those of packing per product, for any thread count.
TEST(SharedWeightPackingTest, UnevenVirtualShardsKeepTheBitsOfPackingPerProduct) {
  std::vector<std::vector<float>> first_weights;
  for (int threads : {1, 2}) {
    TrainSetup setup;
    setup.replicas = 4;
    setup.threads = threads;
    setup.virtual_shards = 8;
    setup.batch = 59;  // shards of 7 and 8 rows; the last batch of 30 rows, shards of 3 and 4
    const TrainedRun shared = Train(setup);
    setup.share_packing = false;
    const TrainedRun apart = Train(setup);
    ASSERT_FALSE(shared.losses.empty());
    EXPECT_TRUE(std::isfinite(shared.losses.back()));
    EXPECT_EQ(shared.weights, apart.weights) << threads;
    EXPECT_EQ(shared.losses, apart.losses) << threads;
    EXPECT_GT(shared.packed, 0) << threads;
    EXPECT_GT(shared.reused, 0) << threads;
    // Deterministic mode's promise holds with it too: the bits of any thread count.
    if (first_weights.empty()) first_weights = shared.weights;
    EXPECT_EQ(shared.weights, first_weights) << threads << " threads against 1";
  }
}

TEST(SharedWeightPackingTest, NothingIsSharedByOneReplicaOrACopyPerReplica) {
  TrainSetup alone;
  alone.replicas = 1;
  alone.threads = 1;
  const TrainedRun one = Train(alone);
  EXPECT_EQ(one.packed + one.reused, 0);
  TrainSetup copies;
  copies.share_variables = false;
  const TrainedRun copied = Train(copies);
  EXPECT_EQ(copied.packed + copied.reused, 0);
  // The copies give the bits of shared variables (the equivalence tests' promise): and so
  // the bits of shared packing.
  EXPECT_EQ(copied.weights, Train(TrainSetup()).weights);
}

}  // namespace
}  // namespace tower
