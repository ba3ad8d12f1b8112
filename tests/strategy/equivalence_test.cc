// The promise of data parallelism: N replicas, each on its shard, train exactly as one
// device does on the whole global batch — to float rounding (the sums are associated
// differently) — and the same run twice gives the same bits.
#include <cmath>

#include <gtest/gtest.h>

#include "device/testing/fake_gpu_platform.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "ops/testing/fake_gpu_kernels.h"
#include "strategy/mirrored_strategy.h"

namespace tower {
namespace {

using testing::FakeGpuSpec;
using testing::MakeContextWithFakeGpus;

struct Trained {
  std::vector<std::vector<float>> weights;
  std::vector<double> losses;
};

data::Dataset Mlp(int64_t rows, int64_t batch) {
  data::SyntheticOptions options;
  options.name = "mlp";
  options.rows = rows;
  options.seed = 5;
  return data::Dataset::Synthetic(options)->Batch(batch);
}

// Trains the same model on `replicas` logical CPUs (0: no strategy, one device).
Trained Train(int replicas, const data::Dataset& dataset, std::unique_ptr<Optimizer> optimizer,
              std::unique_ptr<Loss> loss = MeanSquaredErrorLoss(), int64_t outputs = 1,
              int64_t bucket_bytes = 25ll << 20,
              CrossDeviceOpsKind cross_device_ops = CrossDeviceOpsKind::kAuto,
              int replica_threads = 0, bool fold_replica_gradients = true) {
  auto context = MakeContextWithFakeGpus({});
  TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0],
      std::vector<LogicalDeviceConfiguration>(std::max(replicas, 1))));
  ScopedDefaultContext use(*context);
  std::unique_ptr<MirroredStrategy> strategy;
  Sequential model({Dense(32, "tanh"), Dense(16, "relu"), Dense(outputs)}, 11);
  if (replicas > 0) {
    MirroredStrategyOptions options;
    options.context = context.get();
    options.bucket_bytes = bucket_bytes;
    options.cross_device_ops = cross_device_ops;
    options.replica_threads = replica_threads;
    options.fold_replica_gradients = fold_replica_gradients;
    strategy = std::move(MirroredStrategy::Create(options)).value();
    auto scope = strategy->Scope();
    TOWER_CHECK_OK(model.Compile(std::move(loss), std::move(optimizer)));
  } else {
    TOWER_CHECK_OK(model.Compile(std::move(loss), std::move(optimizer)));
  }
  FitOptions fit;
  fit.epochs = 2;
  fit.verbose = 0;
  StatusOr<History> history = model.Fit(dataset, fit);
  TOWER_CHECK_OK(history.status());
  Trained out;
  for (Variable* variable : model.trainable_variables()) {
    out.weights.push_back(*variable->Read());
    // Every replica's copy is bitwise the same as replica 0's.
    for (int r = 1; r < variable->num_replicas(); ++r) {
      EXPECT_EQ(*variable->value(r).ToHost(), out.weights.back()) << variable->name();
    }
  }
  out.losses = history->values("loss");
  return out;
}

// ‖a − b‖ / ‖b‖ over all weights.
double RelativeError(const Trained& a, const Trained& b) {
  double num = 0, den = 0;
  for (size_t v = 0; v < a.weights.size(); ++v) {
    for (size_t i = 0; i < a.weights[v].size(); ++i) {
      const double d = double{a.weights[v][i]} - b.weights[v][i];
      num += d * d;
      den += double{b.weights[v][i]} * b.weights[v][i];
    }
  }
  return std::sqrt(num / den);
}

TEST(EquivalenceTest, OneTwoThreeFourReplicasMatchOneDeviceOnTheGlobalBatch) {
  // 12 global batches of 24 rows plus a final partial one of 7 (uneven across replicas).
  const data::Dataset dataset = Mlp(12 * 24 + 7, 24);
  const Trained single = Train(0, dataset, SGD(0.001f, 0.9f));
  for (int replicas : {1, 2, 3, 4}) {
    const Trained distributed = Train(replicas, dataset, SGD(0.001f, 0.9f));
    EXPECT_LE(RelativeError(distributed, single), 1e-5) << replicas << " replicas";
    ASSERT_EQ(distributed.losses.size(), single.losses.size());
    for (size_t e = 0; e < single.losses.size(); ++e) {
      EXPECT_NEAR(distributed.losses[e], single.losses[e], 1e-5 * single.losses[e]);
    }
  }
}

TEST(EquivalenceTest, AdamAndCrossEntropyToo) {
  // Class id = floor of the first feature's position in [-1, 1) split in 4.
  std::vector<float> x, y;
  data::SyntheticOptions options;
  options.name = "mlp";
  options.rows = 200;
  auto source = data::Dataset::Synthetic(options);
  auto batch = (*source->Batch(200).MakeIterator())->Next();
  for (int64_t i = 0; i < 200; ++i) {
    y.push_back(std::floor(((*batch)->features[i * 256] + 1) * 2));
  }
  const data::Dataset dataset =
      *data::Dataset::FromTensors((*batch)->features, 256, y, 1);
  const Trained single = Train(0, dataset.Batch(20), Adam(0.001f),
                               SparseCategoricalCrossentropyLoss(), 4);
  for (int replicas : {2, 3}) {
    const Trained distributed = Train(replicas, dataset.Batch(20), Adam(0.001f),
                                      SparseCategoricalCrossentropyLoss(), 4);
    EXPECT_LE(RelativeError(distributed, single), 1e-5) << replicas << " replicas";
  }
}

TEST(EquivalenceTest, RunToRunBitwiseIdentical) {
  const data::Dataset dataset = Mlp(10 * 16 + 5, 16);
  const Trained a = Train(3, dataset, SGD(0.002f, 0.9f, true));
  const Trained b = Train(3, dataset, SGD(0.002f, 0.9f, true));
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_EQ(a.losses, b.losses);
}

// Replicas that outnumber the threads run as fibers: with gradient folding off, that changes
// which thread runs a replica, never what it computes or which slice of the sums it owns.
// (Folded, the sums follow the threads: gradient_folding_test.)
TEST(EquivalenceTest, ReplicasAsFibersGiveTheBitsOfAThreadPerReplica) {
  const data::Dataset dataset = Mlp(6 * 32 + 5, 32);
  for (int replicas : {3, 4, 8}) {
    // Unbatched (batching needs folding's consent): a thread per replica's own bits.
    const Trained own_threads = Train(replicas, dataset, SGD(0.002f, 0.9f), MeanSquaredErrorLoss(),
                                      1, 1024, CrossDeviceOpsKind::kAuto, replicas,
                                      /*fold_replica_gradients=*/false);
    for (int threads : {1, 2}) {
      const Trained fibers = Train(replicas, dataset, SGD(0.002f, 0.9f), MeanSquaredErrorLoss(),
                                   1, 1024, CrossDeviceOpsKind::kAuto, threads,
                                   /*fold_replica_gradients=*/false);
      EXPECT_EQ(fibers.weights, own_threads.weights) << replicas << " on " << threads;
      EXPECT_EQ(fibers.losses, own_threads.losses) << replicas << " on " << threads;
    }
  }
}

TEST(EquivalenceTest, GradientBucketSizeNeverChangesTheBits) {
  // Buckets change when and in how many calls gradients are summed, never the sums: every
  // element is still added in replica order.
  const data::Dataset dataset = Mlp(6 * 16 + 5, 16);
  for (CrossDeviceOpsKind kind :
       {CrossDeviceOpsKind::kInProcess, CrossDeviceOpsKind::kToCpu}) {
    const Trained one_bucket = Train(3, dataset, SGD(0.002f, 0.9f), MeanSquaredErrorLoss(), 1,
                                     25ll << 20, kind);
    for (int64_t bucket_bytes : {1, 2048, 40000}) {
      const Trained bucketed = Train(3, dataset, SGD(0.002f, 0.9f), MeanSquaredErrorLoss(),
                                     1, bucket_bytes, kind);
      EXPECT_EQ(bucketed.weights, one_bucket.weights) << bucket_bytes;
      EXPECT_EQ(bucketed.losses, one_bucket.losses) << bucket_bytes;
    }
  }
}

TEST(EquivalenceTest, VirtualGpusOnOneFakeCardTrainLikeOneDevice) {
  testing::RegisterFakeGpuKernels();
  auto context = MakeContextWithFakeGpus({FakeGpuSpec()});
  TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("GPU")[0],
      {LogicalDeviceConfiguration{256}, LogicalDeviceConfiguration{256}}));
  ScopedDefaultContext use(*context);
  MirroredStrategyOptions options;
  options.context = context.get();
  auto strategy = std::move(MirroredStrategy::Create(options)).value();
  EXPECT_EQ(strategy->devices()[1]->full_name(), "/job:localhost/replica:0/task:0/device:GPU:1");
  Sequential model({Dense(32, "tanh"), Dense(16, "relu"), Dense(1)}, 11);
  {
    auto scope = strategy->Scope();
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.001f, 0.9f)));
  }
  FitOptions fit;
  fit.epochs = 2;
  fit.verbose = 0;
  const data::Dataset dataset = Mlp(12 * 24 + 7, 24);
  ASSERT_TRUE(model.Fit(dataset, fit).ok());
  Trained on_gpus;
  for (Variable* variable : model.trainable_variables()) {
    EXPECT_EQ(variable->value(1).device()->device_type(), "GPU");
    on_gpus.weights.push_back(*variable->Read());
  }
  EXPECT_LE(RelativeError(on_gpus, Train(0, dataset, SGD(0.001f, 0.9f))), 1e-5);
}

}  // namespace
}  // namespace tower
