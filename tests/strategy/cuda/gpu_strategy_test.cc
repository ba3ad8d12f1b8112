// The GPU all-reduce paths and MirroredStrategy on real GPUs: the same-card reduction over
// virtual GPUs on one card and NCCL across cards, with closed-form sums; and 2 and 4 virtual
// GPUs training like one GPU on the global batch. Built with --config=cuda; every test skips
// on a machine without a GPU (NCCL's without two cards).
#include <cmath>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/context.h"
#include "device/cpu_platform.h"
#include "device/gpu_platform.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/collectives/gpu_collectives.h"
#include "strategy/mirrored_strategy.h"
#include "tests/testing/gpu.h"
#include "tests/testing/gpu_contexts.h"

namespace tower {
namespace {

using testing::RealGpuContext;

// Replica r's element i of tensor t: (r + 1)·(i % 5 + t); the sum is n(n+1)/2·(i % 5 + t).
void CheckClosedForm(CrossDeviceOps& ops, const std::vector<Device*>& devices) {
  const int n = static_cast<int>(devices.size());
  for (const std::vector<int64_t>& sizes :
       std::vector<std::vector<int64_t>>{{0}, {1}, {1023}, {5, 0, 300001}, {1 << 22}}) {
    std::vector<std::vector<Tensor>> tensors(n);
    for (int r = 0; r < n; ++r) {
      for (size_t t = 0; t < sizes.size(); ++t) {
        std::vector<float> values(static_cast<size_t>(sizes[t]));
        for (int64_t i = 0; i < sizes[t]; ++i) values[i] = (r + 1.0f) * (i % 5 + t);
        tensors[r].push_back(*Tensor::FromHost(devices[r], Shape{sizes[t]}, values));
      }
    }
    std::vector<Status> results(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        std::vector<Tensor*> mine;
        for (Tensor& t : tensors[r]) mine.push_back(&t);
        results[r] = ops.AllReduce(r, mine);
        if (results[r].ok()) results[r] = ops.FinishReductions(r);
      });
    }
    for (auto& thread : threads) thread.join();
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(results[r].ok()) << results[r];
      for (size_t t = 0; t < sizes.size(); ++t) {
        const std::vector<float> got = *tensors[r][t].ToHost();
        for (int64_t i = 0; i < sizes[t]; ++i) {
          ASSERT_EQ(got[i], n * (n + 1) / 2.0f * (i % 5 + t))
              << ops.name() << " n=" << n << " replica " << r << " tensor " << t << "[" << i << "]";
        }
      }
    }
  }
}

std::vector<std::string> Names(int n) {
  std::vector<std::string> names;
  for (int r = 0; r < n; ++r) names.push_back("replica " + std::to_string(r));
  return names;
}

TEST(GpuStrategyTest, SameCardAllReduceOverVirtualGpus) {
  for (int n : {2, 4}) {
    auto context = RealGpuContext(n);
    if (context == nullptr) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
    std::vector<Device*> gpus = *context->Devices("GPU");
    gpus.resize(n);  // card 0's logical GPUs
    auto ops = MakeSameCardAllReduce(gpus, Names(n), std::chrono::seconds(60), false);
    ASSERT_TRUE(ops.ok()) << ops.status();
    CheckClosedForm(**ops, gpus);
  }
}

TEST(GpuStrategyTest, NcclAcrossCards) {
  auto context = RealGpuContext(0);
  if (context == nullptr) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
  std::vector<Device*> gpus = *context->Devices("GPU");
  if (gpus.size() < 2) GTEST_SKIP() << "NCCL needs two cards; this machine has one";
  auto ops = MakeNcclAllReduce(gpus, Names(static_cast<int>(gpus.size())),
                               std::chrono::seconds(60));
  ASSERT_TRUE(ops.ok()) << ops.status();
  CheckClosedForm(**ops, gpus);
}

TEST(GpuStrategyTest, NcclRefusesTwoRanksOnOneCard) {
  auto context = RealGpuContext(2);
  if (context == nullptr) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
  std::vector<Device*> gpus = *context->Devices("GPU");
  gpus.resize(2);
  auto ops = MakeNcclAllReduce(gpus, Names(2), std::chrono::seconds(60));
  EXPECT_FALSE(ops.ok());
  EXPECT_THAT(ops.status().message(), ::testing::HasSubstr("use same-card"));
}

// K steps of an MLP on `replicas` virtual GPUs (0: one GPU, no strategy).
std::vector<std::vector<float>> Train(int replicas) {
  auto context = RealGpuContext(std::max(replicas, 1));
  ScopedDefaultContext use(*context);
  data::SyntheticOptions mlp;
  mlp.name = "mlp";
  mlp.rows = 24 * 12;
  mlp.seed = 5;
  const data::Dataset dataset = data::Dataset::Synthetic(mlp)->Batch(24);
  Sequential model({Dense(64, "tanh"), Dense(32, "relu"), Dense(1)}, 11);
  std::unique_ptr<MirroredStrategy> strategy;
  if (replicas > 0) {
    MirroredStrategyOptions options;
    options.context = context.get();
    std::vector<Device*> gpus = *context->Devices("GPU");
    for (int r = 0; r < replicas; ++r) options.devices.push_back(gpus[r]->full_name());
    strategy = std::move(MirroredStrategy::Create(options)).value();
    // Logical GPUs of one card: chosen by UUID, never NCCL.
    EXPECT_EQ(strategy->extended().cross_device_ops_choice().kind, CrossDeviceOpsKind::kSameCard);
    auto scope = strategy->Scope();
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.001f, 0.9f)));
  } else {
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.001f, 0.9f)));
  }
  FitOptions fit;
  fit.epochs = 2;
  fit.verbose = 0;
  TOWER_CHECK_OK(model.Fit(dataset, fit).status());
  std::vector<std::vector<float>> weights;
  for (Variable* variable : model.trainable_variables()) weights.push_back(*variable->Read());
  return weights;
}

TEST(GpuStrategyTest, VirtualGpusTrainLikeOneGpuOnTheGlobalBatch) {
  if (RealGpuContext(0) == nullptr) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
  const auto single = Train(0);
  for (int replicas : {2, 4}) {
    const auto distributed = Train(replicas);
    double num = 0, den = 0;
    for (size_t v = 0; v < single.size(); ++v) {
      for (size_t i = 0; i < single[v].size(); ++i) {
        num += std::pow(double{distributed[v][i]} - single[v][i], 2);
        den += std::pow(double{single[v][i]}, 2);
      }
    }
    EXPECT_LE(std::sqrt(num / den), 1e-5) << replicas << " virtual GPUs";
    EXPECT_EQ(Train(replicas), distributed) << "run to run, bitwise";
  }
}

}  // namespace
}  // namespace tower
