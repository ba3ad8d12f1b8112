// Towers (TensorFlow 1's cifar10_multi_gpu_train): averaging the gradients of equal shards computed on several devices
// gives one device's gradient on the whole batch, so training matches.
#include "model/towers.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/testing/fake_gpu_platform.h"
#include "model/dense.h"
#include "ops/testing/fake_gpu_kernels.h"
#include "strategy/mirrored_strategy.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::FakeGpuSpec;
using testing::MakeContextWithFakeGpus;

TEST(TowersTest, SplitBatchKeepsOrderAndBalance) {
  data::Batch batch;
  batch.rows = 5;
  batch.feature_dim = 2;
  batch.target_dim = 1;
  for (int i = 0; i < 10; ++i) batch.features.push_back(static_cast<float>(i));
  for (int i = 0; i < 5; ++i) batch.targets.push_back(static_cast<float>(100 + i));
  const std::vector<data::Batch> shards = SplitBatch(batch, 3);  // 2, 2, 1 rows
  ASSERT_EQ(shards.size(), 3u);
  EXPECT_EQ(shards[0].features, (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(shards[2].features, (std::vector<float>{8, 9}));
  EXPECT_EQ(shards[2].targets, (std::vector<float>{104}));
}

TEST(TowersTest, AveragedTowerGradientsTrainLikeOneDevice) {
  testing::RegisterFakeGpuKernels();
  auto context = MakeContextWithFakeGpus({FakeGpuSpec(), FakeGpuSpec()});
  ScopedDefaultContext use(*context);
  Device* cpu = *context->FindDevice("/CPU:0");
  std::vector<Device*> towers = {*context->FindDevice("/GPU:0"), *context->FindDevice("/GPU:1")};
  auto on_cpu = std::move(OneDeviceStrategy::Create("/CPU:0", context.get())).value();
  auto make = [&]() {
    auto model = std::make_unique<Sequential>(std::vector<std::shared_ptr<Layer>>{Dense(8, "tanh"), Dense(1)}, 4);
    auto scope = on_cpu->Scope();
    TOWER_CHECK_OK(model->Compile(MeanSquaredErrorLoss(), SGD(0.05f)));
    TOWER_CHECK_OK(model->Build(256));
    return model;
  };
  auto towered = make();
  auto single = make();
  data::SyntheticOptions options;
  options.name = "mlp";
  options.rows = 8 * 16;
  auto iterator = std::move(data::Dataset::Synthetic(options)->Batch(16).MakeIterator()).value();
  for (int step = 0; step < 8; ++step) {
    const data::Batch batch = **iterator->Next();
    std::vector<TowerGradients> grads;
    for (size_t i = 0; i < towers.size(); ++i) {
      StatusOr<TowerGradients> g = ComputeTowerGradients(*towered, SplitBatch(batch, 2)[i], towers[i]);
      ASSERT_TRUE(g.ok()) << g.status();
      EXPECT_EQ(g->grads[0].device(), towers[i]);  // computed on the tower's device
      grads.push_back(*g);
    }
    StatusOr<std::vector<Tensor>> averaged = AverageGradients(grads, cpu);
    ASSERT_TRUE(averaged.ok());
    EXPECT_EQ((*averaged)[0].device(), cpu);
    ASSERT_TRUE(towered->ApplyGradients(*averaged).ok());
    ASSERT_TRUE(single->TrainStep(batch).ok());
  }
  for (size_t v = 0; v < single->trainable_variables().size(); ++v) {
    const std::vector<float> a = *towered->trainable_variables()[v]->Read();
    const std::vector<float> b = *single->trainable_variables()[v]->Read();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * (1 + std::fabs(b[i])));
  }
  EXPECT_EQ(towered->optimizer()->iterations(), 8);
  EXPECT_THAT(towered->ApplyGradients({}).message(), HasSubstr("0 gradients for 4 trainable variables"));
  data::Batch empty;
  empty.feature_dim = 256;
  empty.target_dim = 1;
  EXPECT_FALSE(ComputeTowerGradients(*towered, empty, towers[0]).ok());
}

}  // namespace
}  // namespace tower
