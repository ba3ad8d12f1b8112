// Batched replicas (MirroredStrategyOptions::batch_replica_rows): host replicas that
// share their variables compute a step of one pass in batches — by default one, else one
// per batch thread (batch_threads) — a batch's first replica runs the layers once over
// every member's shard, the all-reduce and the update run among the batches, and the other
// members run nothing. Which replicas compute which rows (a layer
// that records its calls), training
// that matches one device to float rounding with the same bits run after run, evaluation and
// metrics over the scattered outputs, uneven and tiny final batches, the cases that do not
// batch, and a failure in a batch's pass that ends the step on every replica.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/testing/fake_gpu_platform.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/mirrored_strategy.h"

namespace tower {
namespace {

using ::testing::HasSubstr;

// Wraps a layer and records, per replica index, the rows of each forward pass; fails (or,
// with `stall`, first sleeps that long) the forward pass of replica `fail_replica` at its
// `fail_call`-th call (1-based; 0: never).
class RecordingLayer : public Layer {
 public:
  explicit RecordingLayer(std::shared_ptr<Layer> inner, int fail_replica = -1, int fail_call = 0,
                          std::chrono::milliseconds stall = std::chrono::milliseconds(0))
      : inner_(std::move(inner)), fail_replica_(fail_replica), fail_call_(fail_call),
        stall_(stall) {}
  std::string Describe() const override { return inner_->Describe(); }
  Status Build(int64_t input_dim, int index, VariableFactory& factory) override {
    return inner_->Build(input_dim, index, factory);
  }
  int64_t output_dim() const override { return inner_->output_dim(); }
  std::vector<Variable*> variables() const override { return inner_->variables(); }
  StatusOr<Tensor> Forward(int replica, const Tensor& x, LayerCache* cache) override {
    int call = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      rows_[replica].push_back(x.shape().dim(0));
      call = static_cast<int>(rows_[replica].size());
    }
    if (replica == fail_replica_ && call == fail_call_) {
      if (stall_.count() == 0) return InternalError("the recording layer failed on purpose");
      std::this_thread::sleep_for(stall_);
    }
    return inner_->Forward(replica, x, cache);
  }
  StatusOr<Tensor> Backward(int replica, const Tensor& dy, const LayerCache& cache,
                            bool need_input_grad, std::vector<Tensor>* grads) override {
    return inner_->Backward(replica, dy, cache, need_input_grad, grads);
  }
  StatusOr<Tensor> BackwardAddingInto(int replica, const Tensor& dy, const LayerCache& cache,
                                      bool need_input_grad, Span<Tensor* const> sums,
                                      std::vector<Tensor>* grads) override {
    return inner_->BackwardAddingInto(replica, dy, cache, need_input_grad, sums, grads);
  }
  void set_weights_version(uint64_t version) override { inner_->set_weights_version(version); }

  // Rows of every forward pass so far, per replica index.
  std::map<int, std::vector<int64_t>> rows() const {
    std::lock_guard<std::mutex> lock(mu_);
    return rows_;
  }

 private:
  std::shared_ptr<Layer> inner_;
  const int fail_replica_;
  const int fail_call_;
  const std::chrono::milliseconds stall_;
  mutable std::mutex mu_;
  std::map<int, std::vector<int64_t>> rows_;
};

struct TrainingRun {
  int replicas = 8;   // 0: one device, no strategy
  int threads = 2;
  bool batch = true;
  int batch_threads = 2;  // MirroredStrategyOptions::batch_threads (0: one batch)
  int micro_batches = 1;  // gradient accumulation
  int64_t rows = 6 * 32 + 5;  // batches of 32, and a last one of 5: 3 replicas of 8 get none
  int64_t bucket_bytes = 25ll << 20;
  int fail_replica = -1;  // the first layer fails on this replica's `fail_call`-th forward
  int fail_call = 0;
  std::chrono::milliseconds stall{0};  // instead of failing, sleeps this long there
  std::chrono::milliseconds collective_timeout = std::chrono::seconds(30);
  // The update after the all-reduce (Optimizer::Apply, each batch a slice) instead of inside
  // it: global-norm clipping needs every sum first, loss scaling decides on them.
  float global_clip_norm = 0;
  bool loss_scaling = false;
};

struct Trained {
  std::vector<std::vector<float>> weights;
  std::vector<double> losses, maes;  // per epoch
  Logs evaluation;                   // Evaluate on the training data afterwards
  std::map<int, std::vector<int64_t>> first_layer_rows;  // RecordingLayer::rows
  int batched_groups = 0;
  Status status;  // Fit's
};

Trained Train(const TrainingRun& setup) {
  auto context = testing::MakeContextWithLogicalCpus(std::max(setup.replicas, 1));
  ScopedDefaultContext use(*context);
  auto recording = std::make_shared<RecordingLayer>(Dense(32, "tanh"), setup.fail_replica,
                                                    setup.fail_call, setup.stall);
  Sequential model({recording, Dense(16, "relu"), Dense(1)}, 11);
  std::unique_ptr<MirroredStrategy> strategy;
  if (setup.replicas > 0) {
    MirroredStrategyOptions options;
    options.context = context.get();
    options.replica_threads = setup.threads;
    options.batch_replica_rows = setup.batch;
    options.batch_threads = setup.batch_threads;
    options.bucket_bytes = setup.bucket_bytes;
    options.collective_timeout = setup.collective_timeout;
    strategy = std::move(MirroredStrategy::Create(options)).value();
    auto scope = strategy->Scope();
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.002f, 0.9f), {"mae"}));
  } else {
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.002f, 0.9f), {"mae"}));
  }
  TOWER_CHECK_OK(model.SetGradientAccumulation(setup.micro_batches));
  TOWER_CHECK_OK(model.optimizer()->SetClipping({.global_clip_norm = setup.global_clip_norm}));
  if (setup.loss_scaling) TOWER_CHECK_OK(model.SetLossScaling(LossScaleOptions{1024, 3}));
  data::SyntheticOptions data;
  data.name = "mlp";
  data.rows = setup.rows;
  data.seed = 5;
  const data::Dataset dataset = data::Dataset::Synthetic(data)->Batch(32);
  FitOptions fit;
  fit.epochs = 2;
  fit.verbose = 0;
  Trained out;
  out.batched_groups = strategy != nullptr ? strategy->extended().batched_groups() : 0;
  StatusOr<History> history = model.Fit(dataset, fit);
  out.status = history.status();
  if (!history.ok()) return out;
  out.losses = history->values("loss");
  out.maes = history->values("mae");
  for (Variable* variable : model.trainable_variables()) {
    out.weights.push_back(*variable->Read());
  }
  StatusOr<Logs> evaluation = model.Evaluate(dataset);
  TOWER_CHECK_OK(evaluation.status());
  out.evaluation = *evaluation;
  out.first_layer_rows = recording->rows();
  return out;
}

// ‖a − b‖ / ‖b‖ over every weight; NaN anywhere gives NaN, which fails every comparison.
double RelativeError(const Trained& a, const Trained& b) {
  if (a.weights.size() != b.weights.size()) return NAN;
  double diff = 0, norm = 0;
  for (size_t v = 0; v < b.weights.size(); ++v) {
    if (a.weights[v].size() != b.weights[v].size()) return NAN;
    for (size_t i = 0; i < b.weights[v].size(); ++i) {
      const double d = a.weights[v][i] - b.weights[v][i];
      diff += d * d;
      norm += static_cast<double>(b.weights[v][i]) * b.weights[v][i];
    }
  }
  return std::sqrt(diff / norm);
}

double RelativeDifference(double a, double b) { return std::fabs(a - b) / std::fabs(b); }

// Same length, each within `tolerance` of the other, relatively (NaN fails).
void ExpectClose(const std::vector<double>& a, const std::vector<double>& b, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_LE(RelativeDifference(a[i], b[i]), tolerance) << what << " " << i << ": " << a[i]
                                                         << " vs " << b[i];
  }
}

// Rows of each shard of a global batch of `rows` over `replicas` (the layout's rule: the
// first rows % replicas replicas take one more).
int64_t ShardRows(int64_t rows, int replicas, int replica) {
  return rows / replicas + (replica < rows % replicas ? 1 : 0);
}

TEST(BatchedReplicasTest, TheFirstReplicaOfEachBatchThreadComputesItsBatchsShards) {
  // (replicas, replica threads, batch threads): 0 is one batch, on the caller's thread,
  // whether the replicas are fibers or have a thread each.
  for (const auto [replicas, threads, batch_threads] :
       {std::tuple{8, 2, 2}, {4, 2, 2}, {3, 2, 2}, {4, 1, 1}, {8, 2, 0}, {2, 2, 0}, {3, 3, 2}}) {
    const std::string what = std::to_string(replicas) + " on " + std::to_string(threads) +
                             ", batch threads " + std::to_string(batch_threads);
    const int batches = std::max(1, batch_threads);
    TrainingRun setup;
    setup.replicas = replicas;
    setup.threads = threads;
    setup.batch_threads = batch_threads;
    const Trained batched = Train(setup);
    ASSERT_TRUE(batched.status.ok()) << batched.status;
    EXPECT_EQ(batched.batched_groups, batches) << what;
    // Training steps (2 epochs of 6 batches of 32 and one of 5), then evaluation's (7): each
    // batch's first replica r runs one pass over the shards of r, r + batches, …
    std::map<int, std::vector<int64_t>> want;
    for (int epoch = 0; epoch < 3; ++epoch) {
      for (int64_t batch_rows : {32, 32, 32, 32, 32, 32, 5}) {
        for (int first = 0; first < batches; ++first) {
          int64_t rows = 0;
          for (int member = first; member < replicas; member += batches) {
            rows += ShardRows(batch_rows, replicas, member);
          }
          want[first].push_back(rows);
        }
      }
    }
    EXPECT_EQ(batched.first_layer_rows, want) << what;
    // Unbatched, every replica runs a pass over its own shard.
    setup.batch = false;
    const Trained apart = Train(setup);
    ASSERT_TRUE(apart.status.ok()) << apart.status;
    EXPECT_EQ(apart.batched_groups, 0);
    EXPECT_EQ(apart.first_layer_rows.size(), static_cast<size_t>(replicas)) << what;
  }
}

TEST(BatchedReplicasTest, ABatchedModelTrainsLikeOneDeviceWithTheSameBitsEveryRun) {
  TrainingRun single;
  single.replicas = 0;
  const Trained one = Train(single);
  ASSERT_TRUE(one.status.ok()) << one.status;
  for (const auto [replicas, threads, batch_threads] :
       {std::tuple{8, 2, 2}, {4, 2, 2}, {3, 2, 2}, {8, 1, 1}, {8, 2, 0}, {2, 2, 0}}) {
    const std::string what = std::to_string(replicas) + " on " + std::to_string(threads) +
                             ", batch threads " + std::to_string(batch_threads);
    TrainingRun setup;
    setup.replicas = replicas;
    setup.threads = threads;
    setup.batch_threads = batch_threads;
    const Trained batched = Train(setup);
    ASSERT_TRUE(batched.status.ok()) << batched.status;
    EXPECT_LE(RelativeError(batched, one), 1e-5) << what;
    // The loss, and the metric computed from every row's output scattered back to its place.
    ExpectClose(batched.losses, one.losses, 1e-5, what + " loss");
    ExpectClose(batched.maes, one.maes, 1e-5, what + " mae");
    ExpectClose({batched.evaluation.at("loss"), batched.evaluation.at("mae")},
                {one.evaluation.at("loss"), one.evaluation.at("mae")}, 1e-5, what + " evaluation");
    // Run to run, and with a bucket per gradient: the same bits.
    const Trained again = Train(setup);
    EXPECT_EQ(again.weights, batched.weights) << what;
    EXPECT_EQ(again.losses, batched.losses) << what;
    setup.bucket_bytes = 1;
    const Trained bucketed = Train(setup);
    EXPECT_EQ(bucketed.weights, batched.weights) << what;
  }
}

TEST(BatchedReplicasTest, OneBatchHasTheSameBitsForAnyReplicaCountAndReplicaThreads) {
  // One batch computes every replica's rows, in replica order (the global batch's order), on
  // the caller's thread with the same intra-op threads: how many replicas there are and how
  // many threads run them changes nothing in its arithmetic.
  TrainingRun setup;
  setup.batch_threads = 0;
  setup.replicas = 2;
  setup.threads = 2;
  const Trained reference = Train(setup);
  ASSERT_TRUE(reference.status.ok()) << reference.status;
  ASSERT_FALSE(reference.weights.empty());
  for (const auto [replicas, threads] : {std::pair{8, 2}, {8, 1}, {3, 3}, {4, 2}}) {
    setup.replicas = replicas;
    setup.threads = threads;
    const Trained other = Train(setup);
    ASSERT_TRUE(other.status.ok()) << other.status;
    EXPECT_EQ(other.weights, reference.weights) << replicas << " on " << threads;
    EXPECT_EQ(other.losses, reference.losses) << replicas << " on " << threads;
  }
}

TEST(BatchedReplicasTest, TheUpdateAfterTheAllReduceIsEveryBatchsSlice) {
  for (const bool scaling : {false, true}) {
    TrainingRun single;
    single.replicas = 0;
    single.global_clip_norm = 0.5f;  // clips: the mlp's gradient norms are in the tens
    single.loss_scaling = scaling;
    const Trained one = Train(single);
    for (int batch_threads : {2, 0}) {
      TrainingRun setup = single;
      setup.replicas = 8;
      setup.batch_threads = batch_threads;
      const Trained batched = Train(setup);
      ASSERT_TRUE(batched.status.ok()) << batched.status;
      EXPECT_EQ(batched.batched_groups, std::max(1, batch_threads));
      EXPECT_LE(RelativeError(batched, one), 1e-5) << (scaling ? "loss scaling" : "clipping");
      ExpectClose(batched.losses, one.losses, 1e-5, scaling ? "loss scaling" : "clipping");
    }
  }
}

TEST(BatchedReplicasTest, ABatchOfNoRowsAndReplicasWithoutRows) {
  // Global batches of 3 rows on 8 replicas: replicas 3..7 have none, and thread 1's batch
  // (replicas 1, 3, 5, 7) has 1 row; batches of 1 row: thread 1's batch has none.
  TrainingRun single;
  single.replicas = 0;
  for (int64_t rows : {3, 1}) {
    single.rows = rows;
    TrainingRun setup;
    setup.rows = rows;
    const Trained one = Train(single);
    const Trained batched = Train(setup);
    ASSERT_TRUE(batched.status.ok()) << batched.status;
    EXPECT_LE(RelativeError(batched, one), 1e-5) << rows;
    ExpectClose(batched.maes, one.maes, 1e-5, std::to_string(rows) + " rows, mae");
  }
}

TEST(BatchedReplicasTest, StepsOfSeveralPassesAndOtherSetupsDoNotBatch) {
  // Gradient accumulation: every replica runs its own micro-batches (one pass each per
  // micro-batch), and trains as one device does.
  TrainingRun single;
  single.replicas = 0;
  single.micro_batches = 2;
  const Trained one = Train(single);
  TrainingRun accumulating;
  accumulating.micro_batches = 2;
  const Trained accumulated = Train(accumulating);
  ASSERT_TRUE(accumulated.status.ok()) << accumulated.status;
  EXPECT_EQ(accumulated.first_layer_rows.size(), 8u);
  EXPECT_LE(RelativeError(accumulated, one), 1e-5);

  // Turned off, or without folding's consent to another summation order: no batches.
  TrainingRun off;
  off.batch = false;
  EXPECT_EQ(Train(off).batched_groups, 0);
  // A copy of the variables per replica, or deterministic mode: no batches either.
  auto context = testing::MakeContextWithLogicalCpus(4);
  MirroredStrategyOptions options;
  options.context = context.get();
  options.replica_threads = 2;
  // Not asked for (the default): each replica computes its own shard.
  EXPECT_EQ((*MirroredStrategy::Create(options))->extended().batched_groups(), 0);
  options.batch_replica_rows = true;
  options.share_variables = false;
  EXPECT_EQ((*MirroredStrategy::Create(options))->extended().batched_groups(), 0);
  options.share_variables = true;
  options.virtual_shards = 4;
  EXPECT_EQ((*MirroredStrategy::Create(options))->extended().batched_groups(), 0);
  options.virtual_shards = 0;
  options.fold_replica_gradients = false;
  EXPECT_EQ((*MirroredStrategy::Create(options))->extended().batched_groups(), 0);
  options.fold_replica_gradients = true;
  EXPECT_EQ((*MirroredStrategy::Create(options))->extended().batched_groups(), 1);
  options.batch_threads = 2;
  EXPECT_EQ((*MirroredStrategy::Create(options))->extended().batched_groups(), 2);
  // More batch threads than replica threads: refused, naming the limit.
  options.batch_threads = 3;
  StatusOr<std::unique_ptr<MirroredStrategy>> refused = MirroredStrategy::Create(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("batch_threads must be 0 (one batch) or 1 "
                                                    "to the 2 replica threads, not 3"));
  // A negative count is refused even where nothing would be batched.
  options.batch_threads = -1;
  options.share_variables = false;
  refused = MirroredStrategy::Create(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("batch_threads must be 0 (one batch) or positive, not -1"));
}

TEST(BatchedReplicasTest, AFailureInABatchsPassEndsTheStepOnEveryReplica) {
  // Replica 1 computes the batch of thread 1 (replicas 1, 3, 5, 7) and fails in its third
  // step: replica 0's batch, waiting for it in the all-reduce, stops too; Fit reports the
  // failure naming the batch, and nothing hangs until the collective deadline.
  TrainingRun setup;
  setup.fail_replica = 1;
  setup.fail_call = 3;
  const auto start = std::chrono::steady_clock::now();
  const Trained failed = Train(setup);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_FALSE(failed.status.ok());
  EXPECT_THAT(failed.status.message(), HasSubstr("replica 1 "));
  EXPECT_THAT(failed.status.message(), HasSubstr("computing the batch of replicas 1, 3, 5, 7"));
  EXPECT_THAT(failed.status.message(), HasSubstr("the recording layer failed on purpose"));
}

TEST(BatchedReplicasTest, AStalledBatchIsNamedAtTheDeadline) {
  // Replica 1's batch sleeps 3 s in its second step; replica 0's batch gives up waiting for it
  // in the all-reduce after 1 s, naming the batch that never arrived and the replicas it
  // computes for.
  TrainingRun setup;
  setup.fail_replica = 1;
  setup.fail_call = 2;
  setup.stall = std::chrono::seconds(3);
  setup.collective_timeout = std::chrono::seconds(1);
  const Trained stalled = Train(setup);
  EXPECT_TRUE(IsDeadlineExceeded(stalled.status)) << stalled.status;
  EXPECT_THAT(stalled.status.message(), HasSubstr("which never arrived"));
  EXPECT_THAT(stalled.status.message(),
              HasSubstr("replica 1 (/job:localhost/replica:0/task:0/device:CPU:1), computing the "
                        "batch of replicas 1, 3, 5, 7"));
}

}  // namespace
}  // namespace tower
