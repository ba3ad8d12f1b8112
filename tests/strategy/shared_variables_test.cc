// Logical CPU replicas of one process share one copy of each variable
// (MirroredStrategyOptions::share_variables): every replica reads the same tensor, and each
// step updates it once, every replica its own slice, inside the all-reduce. The promise:
// the same bits as a copy per replica, on every optimizer, bucket size, replica count and
// scheduling, and on the custom-loop API; and one copy's memory instead of N.
#include <cstring>

#include <gtest/gtest.h>

#include "device/testing/fake_gpu_platform.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "ops/testing/fake_gpu_kernels.h"
#include "strategy/mirrored_strategy.h"

namespace tower {
namespace {

using testing::MakeContextWithFakeGpus;

enum class Opt { kSgd, kMomentum, kNesterov, kAdam };

std::unique_ptr<Optimizer> MakeOptimizer(Opt opt) {
  switch (opt) {
    case Opt::kSgd: return SGD(0.01f);
    case Opt::kMomentum: return SGD(0.005f, 0.9f);
    case Opt::kNesterov: return SGD(0.005f, 0.9f, true);
    case Opt::kAdam: return Adam(0.003f);
  }
  return nullptr;
}

struct TrainingRun {
  int replicas = 2;
  bool share = true;
  Opt optimizer = Opt::kMomentum;
  int64_t bucket_bytes = 25ll << 20;
  int replica_threads = 0;
  bool check_numerics = false;  // keeps the summed gradients: the update after the all-reduce
  bool custom_loop = false;     // ComputeGradients + ApplyGradients(ctx) instead of Fit
  // Fibers of a thread batched (MirroredStrategyOptions::batch_replica_rows): off, so
  // that shared variables are compared bit for bit with copies, which never batch.
  bool batch = false;
};

struct Trained {
  std::vector<std::vector<float>> weights;  // trainable variables, then the optimizer's slots
  std::vector<double> losses;
  bool shared = false;
  uint64_t cpu1_bytes_in_use = 0;  // after training: what replica 1's device still holds
};

data::Dataset Data() {
  data::SyntheticOptions options;
  options.name = "mlp";
  options.rows = 90;  // 4 batches of 24 rows and an uneven last one of 18
  options.seed = 5;
  return data::Dataset::Synthetic(options)->Batch(24);
}

Trained Train(const TrainingRun& setup) {
  auto context = MakeContextWithFakeGpus({});
  TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0],
      std::vector<LogicalDeviceConfiguration>(setup.replicas)));
  ScopedDefaultContext use(*context);
  MirroredStrategyOptions options;
  options.context = context.get();
  options.bucket_bytes = setup.bucket_bytes;
  options.replica_threads = setup.replica_threads;
  options.share_variables = setup.share;
  options.batch_replica_rows = setup.batch;
  std::unique_ptr<MirroredStrategy> strategy = std::move(MirroredStrategy::Create(options)).value();
  Sequential model({Dense(32, "tanh"), Dense(16, "relu"), Dense(1)}, 11);
  {
    auto scope = strategy->Scope();
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), MakeOptimizer(setup.optimizer)));
  }
  model.set_check_numerics(setup.check_numerics);
  const data::Dataset dataset = Data();
  Trained out;
  if (!setup.custom_loop) {
    FitOptions fit;
    fit.epochs = 2;
    fit.verbose = 0;
    StatusOr<History> history = model.Fit(dataset, fit);
    TOWER_CHECK_OK(history.status());
    out.losses = history->values("loss");
  } else {
    TOWER_CHECK_OK(model.Build(dataset.feature_dim()));
    DistributedDataset batches = strategy->DistributeDataset(dataset);
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      TOWER_CHECK_OK(batches.Begin(epoch));
      while (true) {
        auto shards = std::move(batches.Next()).value();
        if (!shards.has_value()) break;
        StatusOr<PerReplica<Tensor>> losses = strategy->Run<Tensor>(
            [&](ReplicaContext& ctx) -> StatusOr<Tensor> {
              const ReplicaBatch& shard = (*shards)[ctx.replica_id()];
              TOWER_ASSIGN_OR_RETURN(ReplicaGradients step,
                                     model.ComputeGradients(ctx, shard.features, shard.targets,
                                                            shard.global_batch_size));
              TOWER_RETURN_IF_ERROR(model.ApplyGradients(ctx, step.gradients));
              return step.loss;
            });
        TOWER_CHECK_OK(losses.status());
        Tensor loss = *strategy->Reduce(ReduceOp::kSum, *losses);
        out.losses.push_back((*loss.ToHost())[0]);
      }
    }
  }
  std::vector<Variable*> all = model.trainable_variables();
  for (Variable* slot : model.optimizer()->slots()) all.push_back(slot);
  for (Variable* variable : all) {
    out.weights.push_back(*variable->Read());
    out.shared = variable->shared();
    for (int r = 1; r < variable->num_replicas(); ++r) {
      EXPECT_EQ(*variable->value(r).ToHost(), out.weights.back()) << variable->name();
      // Shared: the same tensor, on replica 0's device.
      EXPECT_EQ(variable->value(r).raw_data() == variable->value(0).raw_data(), setup.share)
          << variable->name();
      // Each replica's handle counts its references apart (replicas on other cores copy
      // theirs at every op: one count for all would be a line moving between the cores).
      EXPECT_FALSE(variable->value(r).SharesCountsWith(variable->value(0))) << variable->name();
    }
  }
  out.cpu1_bytes_in_use = strategy->devices()[1]->allocator().GetStats().bytes_in_use;
  return out;
}

// Bitwise, so that a NaN anywhere fails.
void ExpectSameBits(const Trained& a, const Trained& b, const std::string& what) {
  ASSERT_EQ(a.weights.size(), b.weights.size()) << what;
  for (size_t v = 0; v < a.weights.size(); ++v) {
    ASSERT_EQ(a.weights[v].size(), b.weights[v].size()) << what;
    EXPECT_EQ(std::memcmp(a.weights[v].data(), b.weights[v].data(), a.weights[v].size() * 4), 0)
        << what << ": variable " << v << " differs";
  }
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a.losses[i], &b.losses[i], sizeof(double)), 0)
        << what << ": loss " << i << " " << a.losses[i] << " vs " << b.losses[i];
  }
}

std::string Name(const TrainingRun& s) {
  return std::to_string(s.replicas) + " replicas, optimizer " +
         std::to_string(static_cast<int>(s.optimizer)) + ", bucket " +
         std::to_string(s.bucket_bytes) + " B, threads " + std::to_string(s.replica_threads) +
         (s.check_numerics ? ", update after the all-reduce" : "") +
         (s.custom_loop ? ", custom loop" : "");
}

TEST(SharedVariablesTest, OneCopyGivesTheBitsOfACopyPerReplica) {
  for (int replicas : {2, 3, 4}) {
    for (Opt optimizer : {Opt::kSgd, Opt::kMomentum, Opt::kNesterov, Opt::kAdam}) {
      // One bucket for everything, and 1 KB buckets: sums handed over while backward runs.
      for (int64_t bucket : {25ll << 20, 1024ll}) {
        TrainingRun setup;
        setup.replicas = replicas;
        setup.optimizer = optimizer;
        setup.bucket_bytes = bucket;
        setup.share = false;
        const Trained copies = Train(setup);
        setup.share = true;
        const Trained shared = Train(setup);
        EXPECT_FALSE(copies.shared);
        EXPECT_TRUE(shared.shared);
        ExpectSameBits(shared, copies, Name(setup));
      }
    }
  }
}

TEST(SharedVariablesTest, UpdateInTheAllReduceOrAfterItGivesTheSameBits) {
  // With check-numerics the summed gradients must be kept: each replica updates its slice
  // after the all-reduce (Optimizer::Apply) instead of inside it.
  for (Opt optimizer : {Opt::kNesterov, Opt::kAdam}) {
    TrainingRun setup;
    setup.replicas = 3;
    setup.optimizer = optimizer;
    setup.bucket_bytes = 1024;
    const Trained in_reduce = Train(setup);
    setup.check_numerics = true;
    const Trained after = Train(setup);
    ExpectSameBits(in_reduce, after, Name(setup));
  }
}

TEST(SharedVariablesTest, FibersAndTheCustomLoopShareToo) {
  TrainingRun setup;
  setup.replicas = 4;
  setup.replica_threads = 1;  // four fibers on one thread
  setup.bucket_bytes = 1024;
  setup.share = false;
  const Trained copies = Train(setup);
  setup.share = true;
  ExpectSameBits(Train(setup), copies, Name(setup));

  TrainingRun loop;
  loop.replicas = 3;
  loop.custom_loop = true;
  loop.optimizer = Opt::kAdam;
  loop.share = false;
  const Trained loop_copies = Train(loop);
  loop.share = true;
  const Trained loop_shared = Train(loop);
  EXPECT_TRUE(loop_shared.shared);
  ExpectSameBits(loop_shared, loop_copies, Name(loop));
}

TEST(SharedVariablesTest, OtherReplicasHoldNoCopy) {
  TrainingRun setup;
  setup.replicas = 2;
  setup.optimizer = Opt::kAdam;  // weights, m and v
  setup.share = false;
  const Trained copies = Train(setup);
  setup.share = true;
  const Trained shared = Train(setup);
  // 256·32 + 32 + 32·16 + 16 + 16 + 1 parameters (the mlp data has 256 features), × 3 for
  // Adam's slots; the allocator rounds each allocation up.
  EXPECT_GE(copies.cpu1_bytes_in_use, 3 * 4 * (256 * 32 + 32 + 32 * 16 + 16 + 16 + 1));
  EXPECT_EQ(shared.cpu1_bytes_in_use, 0u);
}

}  // namespace
}  // namespace tower
