// Mixed precision (model/precision.h) on the CPU: the policies train the mlp workload to
// within 2% of float32's loss after 300 steps (at a stable learning rate: at the benchmark's
// SGD 0.01 the loss jumps by orders of magnitude in the first steps, and two float32 runs
// that differ only in rounding end further apart than that); the hidden layers compute in
// the 16-bit type and the last one in float32; gradients are float32; GPU replicas are
// refused by name.
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data/dataset.h"
#include "device/context.h"
#include "device/testing/fake_gpu_platform.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "ops/testing/fake_gpu_kernels.h"
#include "strategy/mirrored_strategy.h"

namespace tower {
namespace {

using ::testing::HasSubstr;

data::Dataset Mlp(uint64_t seed) {
  data::SyntheticOptions options;
  options.name = "mlp";
  options.rows = 256 * 16;
  options.seed = seed;
  return *data::Dataset::Synthetic(options);
}

// The benchmark's mlp at a quarter of its width (hidden layers of 256, not 1024: a sixteenth
// of the work; at 1024 this was the slowest test under ASan, 184 s, and the policies' losses
// differed from float32's as little, under 0.2 %), 300 steps of SGD 0.001 on 16 global
// batches of 256: its loss over the data afterwards, evaluated under the policy it trained
// with.
double LossAfter300Steps(PrecisionPolicy policy, uint64_t seed) {
  Sequential model({Dense(256, "relu"), Dense(256, "relu"), Dense(1)}, seed);
  TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.001f)));
  TOWER_CHECK_OK(model.SetPrecisionPolicy(policy));
  FitOptions fit;
  fit.epochs = 19;
  fit.max_steps = 300;
  fit.verbose = 0;
  const data::Dataset data = Mlp(seed);
  TOWER_CHECK_OK(model.Fit(data.Batch(256), fit).status());
  StatusOr<Logs> logs = model.Evaluate(data.Batch(256));
  TOWER_CHECK_OK(logs.status());
  return logs->at("loss");
}

TEST(MixedPrecisionTest, BothPoliciesTrainTheMlpToWithinTwoPercentOfFloat32) {
  for (uint64_t seed : {1}) {
    const double reference = LossAfter300Steps(PrecisionPolicy::kFloat32, seed);
    // From about 180 after 100 steps to 2.7 after 300 (seeds 1 to 3).
    ASSERT_LT(reference, 3.0) << "float32 did not train (seed " << seed << ")";
    for (PrecisionPolicy policy : {PrecisionPolicy::kMixedBFloat16,
                                   PrecisionPolicy::kMixedFloat16}) {
      const double loss = LossAfter300Steps(policy, seed);
      EXPECT_LE(std::fabs(loss - reference), 0.02 * reference)  // fails on NaN
          << PrecisionPolicyName(policy) << " (seed " << seed << "): " << loss
          << " against float32's " << reference;
    }
  }
}

TEST(MixedPrecisionTest, HiddenLayersComputeInSixteenBitsTheLastInFloat32) {
  for (PrecisionPolicy policy : {PrecisionPolicy::kMixedBFloat16,
                                 PrecisionPolicy::kMixedFloat16}) {
    Sequential model({Dense(8, "relu"), Dense(8, "tanh"), Dense(3, "softmax"), Dense(1)}, 3);
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.01f)));
    TOWER_CHECK_OK(model.Build(4));
    TOWER_CHECK_OK(model.SetPrecisionPolicy(policy));
    Device* cpu = *Context::Global().FindDevice("/CPU:0");
    const Tensor x = *Tensor::FromHost(cpu, Shape{5, 4}, std::vector<float>(20, 0.5f));
    const Tensor t = *Tensor::FromHost(cpu, Shape{5, 1}, std::vector<float>(5, 1.0f));
    const DType half = ComputeDType(policy);
    std::vector<DType> dtypes;
    Tensor activation = x;
    for (const auto& layer : model.layers()) {
      activation = *layer->Forward(0, activation, nullptr);
      dtypes.push_back(activation.dtype());
    }
    // Dense relu and tanh in 16 bits; softmax and the output layer in float32.
    EXPECT_EQ(dtypes, (std::vector<DType>{half, half, DType::kFloat32, DType::kFloat32}))
        << PrecisionPolicyName(policy);
    PassOptions options;
    options.targets = &t;
    options.loss_rows = 5;
    options.backward = true;
    ReplicaPass pass;
    TOWER_CHECK_OK(model.ForwardBackward(0, x, options, &pass));
    EXPECT_EQ(pass.loss.dtype(), DType::kFloat32);
    for (const Tensor& gradient : pass.gradients) EXPECT_EQ(gradient.dtype(), DType::kFloat32);
  }
}

TEST(MixedPrecisionTest, PolicyNamesAndGpuReplicasAreChecked) {
  EXPECT_EQ(*ParsePrecisionPolicy("mixed_bfloat16"), PrecisionPolicy::kMixedBFloat16);
  EXPECT_THAT(ParsePrecisionPolicy("bfloat16").status().message(),
              HasSubstr("use float32, mixed_bfloat16 or mixed_float16"));
  auto context = testing::MakeContextWithFakeGpus({testing::FakeGpuSpec()});
  ScopedDefaultContext use(*context);
  MirroredStrategyOptions options;
  options.context = context.get();
  options.devices = {"/GPU:0"};
  std::unique_ptr<MirroredStrategy> strategy = std::move(MirroredStrategy::Create(options)).value();
  Sequential model({Dense(4, "relu"), Dense(1)});
  {
    auto scope = strategy->Scope();
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.01f)));
  }
  EXPECT_THAT(model.SetPrecisionPolicy(PrecisionPolicy::kMixedBFloat16).message(),
              HasSubstr("mixed precision runs on CPU replicas in this version"));
  EXPECT_TRUE(model.SetPrecisionPolicy(PrecisionPolicy::kFloat32).ok());
}

}  // namespace
}  // namespace tower
