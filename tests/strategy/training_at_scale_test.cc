// What people who train across devices add to the plain step, and how each meets data
// parallelism:
//   - gradient clipping (by value, by global norm) acts on the summed gradients, after the
//     all-reduce: checked against the step computed by hand, where clipping each replica's
//     own gradient first would give another answer;
//   - gradient accumulation runs each shard as micro-batches and all-reduces once: the same
//     step as the whole batch at once (bitwise in deterministic mode), with a micro-batch's
//     activations at a time;
//   - AdamW and clipping under N replicas, shared or copied variables, match one device.
#include <cmath>
#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/testing/fake_gpu_platform.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "ops/testing/fake_gpu_kernels.h"
#include "strategy/mirrored_strategy.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::MakeContextWithFakeGpus;

enum class Opt { kSgd, kAdam, kAdamW };

std::unique_ptr<Optimizer> MakeOptimizer(Opt opt, float lr) {
  switch (opt) {
    case Opt::kSgd: return SGD(lr);
    case Opt::kAdam: return Adam(lr);
    case Opt::kAdamW: return AdamW(lr, 0.05f);
  }
  return nullptr;
}

struct Config {
  int replicas = 0;  // 0: no strategy, one device
  bool share = true;
  int replica_threads = 0;
  int virtual_shards = 0;
  int64_t bucket_bytes = 25ll << 20;
  Opt optimizer = Opt::kAdam;
  float lr = 0.003f;
  GradientClipping clipping;
  int micro_batches = 1;
  bool check_numerics = false;
  bool linear = false;  // Dense(1) on linreg (one step, checked by hand), else a small MLP
  int64_t rows = 90;
  int64_t batch = 24;
  int epochs = 2;
};

struct Trained {
  std::vector<std::vector<float>> initial;  // trainable variables before training
  std::vector<std::vector<float>> weights;  // trainable variables, then the optimizer's slots
  std::vector<double> losses;
  uint64_t peak_bytes = 0;  // CPU:0's allocator during training
};

data::Dataset Data(const Config& setup) {
  data::SyntheticOptions options;
  options.name = setup.linear ? "linreg" : "mlp";
  options.rows = setup.rows;
  options.seed = 5;
  return data::Dataset::Synthetic(options)->Batch(setup.batch);
}

StatusOr<Trained> Train(const Config& setup) {
  auto context = MakeContextWithFakeGpus({});
  TOWER_RETURN_IF_ERROR(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0],
      std::vector<LogicalDeviceConfiguration>(std::max(setup.replicas, 1))));
  ScopedDefaultContext use(*context);
  std::unique_ptr<MirroredStrategy> strategy;
  std::vector<std::shared_ptr<Layer>> layers;
  if (setup.linear) {
    layers = {Dense(1)};
  } else {
    layers = {Dense(64, "tanh"), Dense(32, "relu"), Dense(1)};
  }
  Sequential model(layers, 11);
  std::unique_ptr<Optimizer> optimizer = MakeOptimizer(setup.optimizer, setup.lr);
  TOWER_RETURN_IF_ERROR(optimizer->SetClipping(setup.clipping));
  if (setup.replicas > 0) {
    MirroredStrategyOptions options;
    options.context = context.get();
    options.share_variables = setup.share;
    options.replica_threads = setup.replica_threads;
    options.virtual_shards = setup.virtual_shards;
    options.bucket_bytes = setup.bucket_bytes;
    TOWER_ASSIGN_OR_RETURN(strategy, MirroredStrategy::Create(options));
    auto scope = strategy->Scope();
    TOWER_RETURN_IF_ERROR(model.Compile(MeanSquaredErrorLoss(), std::move(optimizer)));
  } else {
    TOWER_RETURN_IF_ERROR(model.Compile(MeanSquaredErrorLoss(), std::move(optimizer)));
  }
  model.set_check_numerics(setup.check_numerics);
  TOWER_RETURN_IF_ERROR(model.SetGradientAccumulation(setup.micro_batches));
  const data::Dataset dataset = Data(setup);
  TOWER_RETURN_IF_ERROR(model.Build(dataset.feature_dim()));
  Trained out;
  for (Variable* variable : model.trainable_variables()) {
    TOWER_ASSIGN_OR_RETURN(std::vector<float> values, variable->Read());
    out.initial.push_back(std::move(values));
  }
  Device* cpu0 = *context->FindDevice("/CPU:0");
  cpu0->allocator().ResetPeakStats();
  FitOptions fit;
  fit.epochs = setup.epochs;
  fit.verbose = 0;
  if (setup.linear) fit.max_steps = 1;
  TOWER_ASSIGN_OR_RETURN(History history, model.Fit(dataset, fit));
  out.peak_bytes = cpu0->allocator().GetStats().peak_bytes_in_use;
  out.losses = history.values("loss");
  std::vector<Variable*> all = model.trainable_variables();
  for (Variable* slot : model.optimizer()->slots()) all.push_back(slot);
  for (Variable* variable : all) {
    TOWER_ASSIGN_OR_RETURN(std::vector<float> values, variable->Read());
    out.weights.push_back(std::move(values));
    // Every replica's copy holds replica 0's bits.
    for (int r = 1; r < variable->num_replicas(); ++r) {
      EXPECT_EQ(*variable->value(r).ToHost(), out.weights.back()) << variable->name();
    }
  }
  return out;
}

Trained MustTrain(const Config& setup) {
  StatusOr<Trained> trained = Train(setup);
  TOWER_CHECK_OK(trained.status());
  return *std::move(trained);
}

// ‖a − b‖ / ‖b‖ over the trainable variables and slots; NaN anywhere gives NaN.
double RelativeError(const Trained& a, const Trained& b) {
  double num = 0, den = 0;
  EXPECT_EQ(a.weights.size(), b.weights.size());
  for (size_t v = 0; v < a.weights.size() && v < b.weights.size(); ++v) {
    EXPECT_EQ(a.weights[v].size(), b.weights[v].size());
    for (size_t i = 0; i < a.weights[v].size() && i < b.weights[v].size(); ++i) {
      const double d = double{a.weights[v][i]} - b.weights[v][i];
      num += d * d;
      den += double{b.weights[v][i]} * b.weights[v][i];
    }
  }
  return std::sqrt(num / den);
}

bool SameBits(const Trained& a, const Trained& b) {
  if (a.weights.size() != b.weights.size()) return false;
  for (size_t v = 0; v < a.weights.size(); ++v) {
    if (a.weights[v].size() != b.weights[v].size() ||
        std::memcmp(a.weights[v].data(), b.weights[v].data(), a.weights[v].size() * 4) != 0) {
      return false;
    }
  }
  return true;
}

std::string Name(const Config& s) {
  return std::to_string(s.replicas) + " replicas" + (s.share ? " (shared)" : " (copies)") +
         ", micro-batches " + std::to_string(s.micro_batches) + ", clip value " +
         std::to_string(s.clipping.clip_value) + ", global clip norm " +
         std::to_string(s.clipping.global_clip_norm) + ", optimizer " +
         std::to_string(static_cast<int>(s.optimizer)) +
         (s.check_numerics ? ", check-numerics" : "");
}

// ---- Clipping, against one SGD step computed by hand ------------------------------------

// Dense(1) on the first batch of linreg: y ≈ w·x + b, MSE over the batch:
//   ∂/∂w = 2/N Σ (w·x + b − y)·x,   ∂/∂b = 2/N Σ (w·x + b − y),
// clipped as `clipping` says, then one SGD step of `lr`. Returns {w, b} after it.
std::vector<double> ClippedStepByHand(const Config& setup, double w, double b) {
  std::unique_ptr<data::Iterator> batches = std::move(Data(setup).MakeIterator()).value();
  const data::Batch batch = *std::move(batches->Next()).value();
  double gw = 0, gb = 0;
  for (int64_t i = 0; i < batch.rows; ++i) {
    const double x = batch.features[i], y = batch.targets[i];
    const double e = w * x + b - y;
    gw += 2 * e * x / batch.rows;
    gb += 2 * e / batch.rows;
  }
  if (setup.clipping.clip_value > 0) {
    const double c = setup.clipping.clip_value;
    gw = std::min(std::max(gw, -c), c);
    gb = std::min(std::max(gb, -c), c);
  }
  if (setup.clipping.global_clip_norm > 0) {
    const double norm = std::sqrt(gw * gw + gb * gb);
    const double c = setup.clipping.global_clip_norm;
    if (norm > c) {
      gw *= c / norm;
      gb *= c / norm;
    }
  }
  return {w - setup.lr * gw, b - setup.lr * gb};
}

TEST(GradientClippingTest, ClipsTheSummedGradientsOnEveryReplicaAsOneDeviceWould) {
  // Each replica's own gradient is about 1/R of the sum: clipping those before the sum
  // (clip value 0.3 on gradients of size ~1–3) would give R times the clipped step.
  for (GradientClipping clipping : {GradientClipping{0.3f, 0}, GradientClipping{0, 0.5f}}) {
    for (int replicas : {0, 1, 2, 3}) {
      for (bool share : {true, false}) {
        for (bool check_numerics : {false, true}) {
          if (replicas < 2 && (!share || check_numerics)) continue;
          Config setup;
          setup.linear = true;
          setup.optimizer = Opt::kSgd;
          setup.lr = 0.5f;
          setup.clipping = clipping;
          setup.replicas = replicas;
          setup.share = share;
          setup.check_numerics = check_numerics;  // the update after the all-reduce
          const Trained trained = MustTrain(setup);
          const std::vector<double> want =
              ClippedStepByHand(setup, trained.initial[0][0], trained.initial[1][0]);
          // The gradients are of size ~1: clipping must have changed them for the test to
          // mean anything.
          Config unclipped = setup;
          unclipped.clipping = GradientClipping();
          const std::vector<double> free =
              ClippedStepByHand(unclipped, trained.initial[0][0], trained.initial[1][0]);
          ASSERT_GT(std::fabs(free[0] - want[0]), 0.05) << Name(setup);
          EXPECT_NEAR(trained.weights[0][0], want[0], 1e-6) << "kernel, " << Name(setup);
          EXPECT_NEAR(trained.weights[1][0], want[1], 1e-6) << "bias, " << Name(setup);
        }
      }
    }
  }
}

TEST(GradientClippingTest, ClippedTrainingOnNReplicasMatchesOneDevice) {
  for (Opt optimizer : {Opt::kAdam, Opt::kAdamW, Opt::kSgd}) {
    for (GradientClipping clipping : {GradientClipping{0.002f, 0}, GradientClipping{0, 0.05f}}) {
      Config setup;
      setup.optimizer = optimizer;
      setup.lr = optimizer == Opt::kSgd ? 0.01f : 0.003f;
      setup.clipping = clipping;
      const Trained single = MustTrain(setup);
      for (int replicas : {2, 4}) {
        for (bool share : {true, false}) {
          setup.replicas = replicas;
          setup.share = share;
          setup.bucket_bytes = 1024;  // sums handed over while backward runs
          const Trained distributed = MustTrain(setup);
          EXPECT_LE(RelativeError(distributed, single), 1e-5) << Name(setup);
        }
      }
      // Clipping changed the run: without it the weights are elsewhere.
      Config unclipped = setup;
      unclipped.replicas = 0;
      unclipped.clipping = GradientClipping();
      EXPECT_GT(RelativeError(MustTrain(unclipped), single), 1e-3) << Name(setup);
    }
  }
}

TEST(GradientClippingTest, BadSettingsAndAnInfiniteNormAreErrors) {
  auto sgd = SGD(0.1f);
  EXPECT_THAT(sgd->SetClipping({1, 1}).message(), HasSubstr("not both"));
  EXPECT_THAT(sgd->SetClipping({-1, 0}).message(), HasSubstr("must be finite and >= 0"));
  EXPECT_THAT(sgd->SetClipping({0, INFINITY}).message(), HasSubstr("must be finite and >= 0"));
  // A gradient that overflowed: the norm is Inf, and the step fails instead of writing NaN.
  Device* cpu = *Context::Global().FindDevice("/CPU:0");
  Variable w("w", {*Tensor::FromHost(cpu, Shape{2}, std::vector<float>{1, 1})});
  std::vector<Variable*> variables = {&w};
  TOWER_CHECK_OK(sgd->Build(variables));
  TOWER_CHECK_OK(sgd->SetClipping({0, 1}));
  const Tensor inf = *Tensor::FromHost(cpu, Shape{2}, std::vector<float>{INFINITY, 0});
  EXPECT_THAT(sgd->Apply(0, 4, variables, {inf}).message(),
              HasSubstr("global norm is Inf at update 5"));
  EXPECT_EQ(*w.Read(), (std::vector<float>{1, 1}));
  // Closed form: gradients (3, 4) have norm 5; clipped to 1 they are (0.6, 0.8).
  const Tensor g = *Tensor::FromHost(cpu, Shape{2}, std::vector<float>{3, 4});
  EXPECT_FLOAT_EQ(*sgd->GlobalNormScale({g}, 0), 0.2f);
  TOWER_CHECK_OK(sgd->Apply(0, 0, variables, {g}));
  const std::vector<float> after = *w.Read();
  EXPECT_NEAR(after[0], 1 - 0.1 * 0.6, 1e-7);
  EXPECT_NEAR(after[1], 1 - 0.1 * 0.8, 1e-7);
}

// ---- Gradient accumulation ---------------------------------------------------------------

TEST(GradientAccumulationTest, MicroBatchesGiveTheStepOfTheWholeBatch) {
  // 4 micro-batches of 64 against one step of 256 (and an uneven last batch of 100), on
  // 1, 2 and 4 replicas, shared variables and copies, and 4 fibers on one thread.
  Config whole;
  whole.rows = 2 * 256 + 100;
  whole.batch = 256;
  whole.optimizer = Opt::kAdam;
  const Trained single = MustTrain(whole);
  for (int replicas : {0, 1, 2, 4}) {
    for (bool share : {true, false}) {
      if (replicas < 2 && !share) continue;
      Config setup = whole;
      setup.replicas = replicas;
      setup.share = share;
      setup.micro_batches = 4;
      setup.bucket_bytes = 4096;
      const Trained accumulated = MustTrain(setup);
      EXPECT_LE(RelativeError(accumulated, single), 1e-5) << Name(setup);
      ASSERT_EQ(accumulated.losses.size(), single.losses.size());
      for (size_t e = 0; e < single.losses.size(); ++e) {
        EXPECT_NEAR(accumulated.losses[e], single.losses[e], 1e-5 * single.losses[e]);
      }
      // The same run twice: the same bits.
      EXPECT_TRUE(SameBits(MustTrain(setup), accumulated)) << Name(setup);
    }
  }
  Config fibers = whole;
  fibers.replicas = 4;
  fibers.replica_threads = 1;
  fibers.micro_batches = 4;
  EXPECT_LE(RelativeError(MustTrain(fibers), single), 1e-5) << "4 fibers on one thread";
}

TEST(GradientAccumulationTest, EmptyMicroBatchesOfASmallFinalBatchAreHandled) {
  // 90 rows in batches of 24: the last batch has 18 rows, 4 or 5 per replica, cut into 8
  // micro-batches: some have no rows at all.
  Config whole;
  whole.optimizer = Opt::kSgd;
  whole.lr = 0.01f;
  const Trained single = MustTrain(whole);
  for (int replicas : {1, 4}) {
    Config setup = whole;
    setup.replicas = replicas;
    setup.micro_batches = 8;
    EXPECT_LE(RelativeError(MustTrain(setup), single), 1e-5) << Name(setup);
  }
}

TEST(GradientAccumulationTest, HoldsAMicroBatchsActivationsAtATime) {
  // One replica, batches of 512 rows: the activations (512 × (64 + 32 + 1) floats, with
  // their gradients) dominate the step's memory; 8 micro-batches hold an eighth of them.
  Config whole;
  whole.replicas = 1;
  whole.rows = 1024;
  whole.batch = 512;
  whole.epochs = 1;
  const Trained at_once = MustTrain(whole);
  Config micro = whole;
  micro.micro_batches = 8;
  const Trained accumulated = MustTrain(micro);
  EXPECT_LE(RelativeError(accumulated, at_once), 1e-5);
  // Weights, Adam's slots and the batch are the same on both sides (~ 0.2 MB); the
  // activations of 512 rows are 512 · 97 · 4 B ≈ 0.2 MB per copy.
  EXPECT_LT(accumulated.peak_bytes + 200000, at_once.peak_bytes)
      << "peak " << accumulated.peak_bytes << " B with micro-batches against "
      << at_once.peak_bytes << " B at once";
}

TEST(GradientAccumulationTest, DeterministicModeGivesTheBitsOfTheWholeBatch) {
  // The virtual shards are the micro-batches: accumulation changes nothing of the sums.
  Config whole;
  whole.rows = 256 + 100;
  whole.batch = 128;
  whole.virtual_shards = 8;
  whole.replicas = 2;
  const Trained reference = MustTrain(whole);
  for (int replicas : {1, 2}) {
    Config setup = whole;
    setup.replicas = replicas;
    setup.micro_batches = 4;
    EXPECT_TRUE(SameBits(MustTrain(setup), reference)) << Name(setup);
  }
  // Fewer virtual shards per replica than micro-batches: refused, saying what to set.
  Config few = whole;
  few.replicas = 4;
  few.micro_batches = 4;
  StatusOr<Trained> refused = Train(few);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("use at least 16 virtual shards"));
  Sequential model({Dense(1)});
  EXPECT_THAT(model.SetGradientAccumulation(0).message(), HasSubstr("give 1 (off) or more"));
}

}  // namespace
}  // namespace tower
