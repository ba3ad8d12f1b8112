// Gradient folding (strategy/reducers/gradient_folding.h): replicas that share a thread add their
// gradients into one running sum per thread, and the all-reduce adds the sums in thread
// order. Closed-form sums whose bits tell the orders apart, waits that end when a replica
// fails, and a model trained folded: the same bits run after run and for any bucket size,
// and one device's result to float rounding.
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/testing/fake_gpu_platform.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/reducers/gradient_folding.h"
#include "strategy/mirrored_strategy.h"
#include "util/logging.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::MakeContextWithFakeGpus;

std::unique_ptr<Context> Cpus(int n) { return testing::MakeContextWithLogicalCpus(n); }

std::unique_ptr<MirroredStrategy> Strategy(Context& context, int threads, bool fold,
                                           int64_t bucket_bytes = 25ll << 20) {
  MirroredStrategyOptions options;
  options.context = &context;
  options.replica_threads = threads;
  options.fold_replica_gradients = fold;
  // Every replica computes its own gradients and folds them (batched replicas, which hand
  // on their batch's, are tested in batched_replicas_test).
  options.batch_replica_rows = false;
  options.bucket_bytes = bucket_bytes;
  return std::move(MirroredStrategy::Create(options)).value();
}

// Each replica's gradients through its reducer, as a training step sends them: `values[r]`
// is replica r's value of every element of both gradients ([3] and [5]). Returns each
// replica's two gradients after Finish (the sums).
std::vector<std::vector<float>> SumThroughReducers(MirroredStrategy& strategy,
                                                   const std::vector<float>& values) {
  const int replicas = strategy.extended().num_local_replicas();
  std::vector<std::vector<float>> out(replicas);
  const Status status = strategy.extended().RunOnReplicas([&](ReplicaContext& ctx) -> Status {
    const int r = ctx.replica_id();
    GradientReducer& reducer = ctx.gradient_reducer();
    const int64_t bytes[] = {3 * 4, 5 * 4};
    TOWER_RETURN_IF_ERROR(reducer.Begin(bytes, /*pass=*/0, /*passes=*/1));
    TOWER_ASSIGN_OR_RETURN(Tensor a, Tensor::FromHost(ctx.device(), Shape{3},
                                                      std::vector<float>(3, values[r])));
    TOWER_ASSIGN_OR_RETURN(Tensor b, Tensor::FromHost(ctx.device(), Shape{5},
                                                      std::vector<float>(5, values[r])));
    TOWER_RETURN_IF_ERROR(reducer.Add(&a));
    TOWER_RETURN_IF_ERROR(reducer.Add(&b));
    TOWER_RETURN_IF_ERROR(reducer.Finish({}));
    TOWER_ASSIGN_OR_RETURN(std::vector<float> ha, a.ToHost());
    TOWER_ASSIGN_OR_RETURN(std::vector<float> hb, b.ToHost());
    out[r] = ha;
    out[r].insert(out[r].end(), hb.begin(), hb.end());
    return OkStatus();
  });
  TOWER_CHECK_OK(status);
  return out;
}

// The waits' bookkeeping alone, outside fibers (a wait that is not ready then fails instead
// of yielding): a member takes its group's sums only from the same run and pass, also when
// the run counter wraps around its field; an abort ends every wait.
TEST(GradientFoldingTest, AWaitTakesOnlyThisPasssSums) {
  GradientFolding folding(/*replicas=*/2, /*groups=*/1);
  Tensor sum;
  folding.StartRun();
  const uint64_t first = folding.Generation(0);
  folding.Publish(0, first, 0, &sum);
  StatusOr<Span<Tensor* const>> got = folding.WaitForSums(1, first, 0, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0], &sum);
  // The next pass, and the next run: the word published above is stale.
  EXPECT_TRUE(IsFailedPrecondition(folding.WaitForSums(1, folding.Generation(1), 0, 1).status()));
  EXPECT_TRUE(IsFailedPrecondition(folding.WaitForSums(1, first, 0, 2).status()));
  folding.StartRun();
  EXPECT_NE(folding.Generation(0), first);
  EXPECT_TRUE(IsFailedPrecondition(folding.WaitForSums(1, folding.Generation(0), 0, 1).status()));
  // 2^28 runs later the run field has wrapped to where `first` was: the runs around the
  // wrap still differ from their neighbours.
  const uint64_t before_wrap = folding.run();
  while (folding.run() - before_wrap < (uint64_t{1} << 28) - 2) folding.StartRun();
  const uint64_t last = folding.Generation(0);
  folding.Publish(0, last, 0, &sum);
  folding.StartRun();
  EXPECT_NE(folding.Generation(0), last);
  EXPECT_TRUE(IsFailedPrecondition(folding.WaitForSums(1, folding.Generation(0), 0, 1).status()));
  folding.Abort(InvalidArgumentError("bad shard"));
  const Status aborted = folding.WaitForSums(1, folding.Generation(0), 0, 1).status();
  EXPECT_EQ(aborted.code(), StatusCode::kAborted) << aborted;
  EXPECT_THAT(aborted.message(), HasSubstr("bad shard"));
  folding.Reset();
  EXPECT_TRUE(IsFailedPrecondition(folding.WaitForSums(1, folding.Generation(0), 0, 1).status()));
}

// Which steps fold: one pass, and at least one gradient but no more than a count's field
// holds (a larger count would wrap into the generation and match a stale word).
TEST(GradientFoldingTest, OnlyStepsOfOnePassAndCountableGradientsFold) {
  EXPECT_TRUE(GradientFolding::FoldsStep(1, 1));
  EXPECT_TRUE(GradientFolding::FoldsStep(GradientFolding::kMaxGradients, 1));
  EXPECT_FALSE(GradientFolding::FoldsStep(GradientFolding::kMaxGradients + 1, 1));
  EXPECT_FALSE(GradientFolding::FoldsStep(0, 1));
  EXPECT_FALSE(GradientFolding::FoldsStep(6, 2));  // gradient accumulation
}

// 1e8 + 1 rounds to 1e8 in float32, so the order of the additions shows in the sum.
// Folded, 4 replicas on 2 threads: (g0 + g2) + (g1 + g3) = (1e8 − 1e8) + (1 + 1) = 2.
// A thread per replica, or folding off: ((g0 + g1) + g2) + g3 = (1e8 − 1e8) + 1 = 1.
TEST(GradientFoldingTest, GroupsAddInThreadOrderThenTheAllReduceAddsTheGroups) {
  const std::vector<float> values = {1e8f, 1.0f, -1e8f, 1.0f};
  auto context = Cpus(4);
  for (int64_t bucket_bytes : {int64_t{1}, int64_t{25} << 20}) {
    auto folded = Strategy(*context, 2, /*fold=*/true, bucket_bytes);
    for (const std::vector<float>& sums : SumThroughReducers(*folded, values)) {
      EXPECT_EQ(sums, std::vector<float>(8, 2.0f)) << "bucket " << bucket_bytes;
    }
    auto unfolded = Strategy(*context, 2, /*fold=*/false, bucket_bytes);
    for (const std::vector<float>& sums : SumThroughReducers(*unfolded, values)) {
      EXPECT_EQ(sums, std::vector<float>(8, 1.0f)) << "bucket " << bucket_bytes;
    }
  }
}

// One thread: one group, the replicas added in replica order (the unfolded order).
// Three threads for 8 replicas: groups {0, 3, 6}, {1, 4, 7}, {2, 5}.
TEST(GradientFoldingTest, GroupsFollowTheThreads) {
  auto context = Cpus(8);
  // Group sums on 3 threads: (1e8 + 1 + 1) = 1e8, (1 − 1e8 + 1) = −1e8 + 1 → −1e8 (as
  // float: 1 − 1e8 = −99999999 → −1e8, + 1 → −1e8), (−1e8 + 4) → −1e8 + 4 = −99999996.
  const std::vector<float> values = {1e8f, 1.0f, -1e8f, 1.0f, -1e8f, 4.0f, 1.0f, 1.0f};
  auto expected = [&](int threads) {
    std::vector<float> groups(threads, 0.0f);
    std::vector<bool> started(threads, false);
    for (int r = 0; r < 8; ++r) {
      float& sum = groups[r % threads];
      sum = started[r % threads] ? sum + values[r] : values[r];
      started[r % threads] = true;
    }
    float total = groups[0];
    for (int g = 1; g < threads; ++g) total += groups[g];
    return total;
  };
  for (int threads : {1, 2, 3}) {
    auto strategy = Strategy(*context, threads, /*fold=*/true);
    const std::vector<std::vector<float>> sums = SumThroughReducers(*strategy, values);
    for (int r = 0; r < 8; ++r) {
      EXPECT_EQ(sums[r], std::vector<float>(8, expected(threads))) << threads << " threads";
    }
  }
  // The reference distinguishes the groupings: the test would see a wrong one.
  EXPECT_NE(expected(2), expected(3));
  EXPECT_NE(expected(1), expected(2));
}

// A replica that fails before its gradients: the replicas of its group that wait for them
// stop with the failure (no hang), and the next run folds again from a clean state.
TEST(GradientFoldingTest, AFailedReplicaEndsItsGroupsWaitsAndTheNextRunWorks) {
  auto context = Cpus(4);
  auto strategy = Strategy(*context, 2, /*fold=*/true);
  for (int failing : {0, 2}) {
    const auto start = std::chrono::steady_clock::now();
    const Status status = strategy->extended().RunOnReplicas([&](ReplicaContext& ctx) -> Status {
      if (ctx.replica_id() == failing) return InvalidArgumentError("bad shard");
      GradientReducer& reducer = ctx.gradient_reducer();
      const int64_t bytes[] = {4};
      TOWER_RETURN_IF_ERROR(reducer.Begin(bytes, 0, 1));
      TOWER_ASSIGN_OR_RETURN(Tensor g, Tensor::FromHost(ctx.device(), Shape{1}, {1.0f}));
      TOWER_RETURN_IF_ERROR(reducer.Add(&g));
      return reducer.Finish({});
    });
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    EXPECT_TRUE(IsInvalidArgument(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr("bad shard"));
  }
  const std::vector<float> values = {1e8f, 1.0f, -1e8f, 1.0f};
  for (const std::vector<float>& sums : SumThroughReducers(*strategy, values)) {
    EXPECT_EQ(sums, std::vector<float>(8, 2.0f));
  }
}

// A folded replica must pass its group's sums; any other tensor is refused (it would be
// added never, or its group's twice), whether the lists are summed whole (small) or in
// slices, and the run fails instead of summing.
TEST(GradientFoldingTest, AFoldedReplicaWithATensorOfItsOwnIsRefused) {
  auto context = Cpus(4);
  auto strategy = Strategy(*context, 2, /*fold=*/true);
  const AllReduceOptions folded = AllReduceOptions::Folded(/*folded=*/1, /*fold_groups=*/2);
  ASSERT_TRUE(strategy->extended().cross_device_ops().Supports(folded));
  for (int64_t elements : {int64_t{1}, int64_t{100000}}) {
    const Status status = strategy->extended().RunOnReplicas([&](ReplicaContext& ctx) -> Status {
      TOWER_ASSIGN_OR_RETURN(Tensor own, Tensor::Zeros(ctx.device(), Shape{elements}));
      Tensor* list[] = {&own};
      return strategy->extended().cross_device_ops().AllReduce(ctx.replica_id(), list, folded);
    });
    EXPECT_TRUE(IsInvalidArgument(status)) << elements << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr("passed another tensor 0 than replica"));
  }
}

struct Trained {
  std::vector<std::vector<float>> weights;
  std::vector<double> losses;
};

// The equivalence test's model and data; 0 replicas: one device, no strategy. With
// `placement_log`, the training's placement log (one line per op run) is captured into it.
Trained Train(int replicas, int threads, bool fold, int64_t bucket_bytes = 25ll << 20,
              std::string* placement_log = nullptr) {
  auto context = Cpus(std::max(replicas, 1));
  ScopedDefaultContext use(*context);
  std::optional<ScopedLogCapture> capture;
  if (placement_log != nullptr) {
    context->SetLogDevicePlacement(true);
    capture.emplace();
  }
  std::unique_ptr<MirroredStrategy> strategy;
  Sequential model({Dense(32, "tanh"), Dense(16, "relu"), Dense(1)}, 11);
  if (replicas > 0) {
    strategy = Strategy(*context, threads, fold, bucket_bytes);
    auto scope = strategy->Scope();
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.002f, 0.9f)));
  } else {
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.002f, 0.9f)));
  }
  data::SyntheticOptions data;
  data.name = "mlp";
  data.rows = 6 * 32 + 5;
  data.seed = 5;
  FitOptions fit;
  fit.epochs = 2;
  fit.verbose = 0;
  StatusOr<History> history = model.Fit(data::Dataset::Synthetic(data)->Batch(32), fit);
  TOWER_CHECK_OK(history.status());
  Trained out;
  for (Variable* variable : model.trainable_variables()) {
    out.weights.push_back(*variable->Read());
  }
  out.losses = history->values("loss");
  if (placement_log != nullptr) *placement_log = capture->text();
  return out;
}

double RelativeError(const Trained& a, const Trained& b) {
  double diff = 0;
  double norm = 0;
  for (size_t v = 0; v < b.weights.size(); ++v) {
    for (size_t i = 0; i < b.weights[v].size(); ++i) {
      const double d = a.weights[v][i] - b.weights[v][i];
      diff += d * d;
      norm += b.weights[v][i] * b.weights[v][i];
    }
  }
  return std::sqrt(diff / norm);  // NaN in a weight gives NaN: the comparison below fails
}

// Dense adds its kernel's gradient in place (MatMulAdd), its bias's through the reducer.
TEST(GradientFoldingTest, AFoldedModelTrainsLikeOneDeviceWithTheSameBitsEveryRun) {
  const Trained single = Train(0, 1, false);
  for (int replicas : {3, 4, 8}) {
    for (int threads : {1, 2}) {
      const Trained folded = Train(replicas, threads, true);
      EXPECT_LE(RelativeError(folded, single), 1e-5) << replicas << " on " << threads;
      const Trained again = Train(replicas, threads, true);
      EXPECT_EQ(again.weights, folded.weights) << replicas << " on " << threads;
      EXPECT_EQ(again.losses, folded.losses) << replicas << " on " << threads;
      // Buckets of one gradient each: the same layers add in place, the same bits.
      const Trained bucketed = Train(replicas, threads, true, /*bucket_bytes=*/1);
      EXPECT_EQ(bucketed.weights, folded.weights) << replicas << " on " << threads;
    }
  }
}

// Which path Dense takes. Folded, every replica of a thread but its first adds each kernel's
// gradient into the running sum (MatMulAdd), for any bucket size; unfolded, none does. At
// these depths the in-place add and MatMul-then-add give the same bits, so only the ops that
// ran tell the paths apart.
TEST(GradientFoldingTest, LaterReplicasOfAThreadAddEveryKernelGradientInPlace) {
  auto count = [](const std::string& log, const std::string& line) {
    int n = 0;
    for (size_t at = log.find(line); at != std::string::npos; at = log.find(line, at + 1)) ++n;
    return n;
  };
  auto matmul_adds_on = [&](const std::string& log, int replica) {
    return count(log, "Executing op MatMulAdd in device /job:localhost/replica:0/task:0/device:CPU:" +
                          std::to_string(replica) + "\n");
  };
  // 197 rows in batches of 32: 7 steps an epoch (the last of 5 rows, still on every
  // replica), 2 epochs; 3 Dense layers.
  const int kernel_gradients = 14 * 3;
  for (int64_t bucket_bytes : {25ll << 20, 1ll}) {
    std::string log;
    Train(/*replicas=*/4, /*threads=*/2, /*fold=*/true, bucket_bytes, &log);
    // 4 replicas on 2 threads: replicas 2 and 3 follow 0 and 1 on their threads, and add into
    // their leaders' sums (an op runs where its output lives: the leaders' devices).
    EXPECT_EQ(matmul_adds_on(log, 0), kernel_gradients) << bucket_bytes;
    EXPECT_EQ(matmul_adds_on(log, 1), kernel_gradients) << bucket_bytes;
    EXPECT_EQ(matmul_adds_on(log, 2), 0) << bucket_bytes;
    EXPECT_EQ(matmul_adds_on(log, 3), 0) << bucket_bytes;
    Train(/*replicas=*/4, /*threads=*/2, /*fold=*/false, bucket_bytes, &log);
    EXPECT_GT(count(log, "Executing op MatMul in device"), 0) << bucket_bytes;
    EXPECT_EQ(count(log, "Executing op MatMulAdd in device"), 0) << bucket_bytes;
  }
}

}  // namespace
}  // namespace tower
