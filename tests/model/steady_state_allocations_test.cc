// No heap allocation in a steady-state training step (after the first steps), counted on
// every thread, without a strategy and for 1, 2 and 4 logical CPU replicas (one batch, the
// default, or each replica computing its own shard on its own thread), and for 4 and 8 as
// fibers on 2 threads, their steps batched or each replica computing its own,
// on linreg and a small mlp. What a step used to allocate and where it
// went: the allocator's bookkeeping nodes (now from its node pool), each tensor's reference
// counts (from the device allocator's record pool), the per-pass vectors of
// Sequential::RunBatch / ForwardBackward (per-thread scratch, released tensors and all at
// the end of the step), RunBatch's closure (fits std::function's inline storage) and the
// device name each replica's scope used to parse.
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "data/dataset.h"
#include "device/context.h"
#include "device/testing/fake_gpu_platform.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/mirrored_strategy.h"
#include "tests/testing/allocation_counter.h"

namespace tower {
namespace {

using testing::CountAllocations;

// Allocations per step of Sequential::TrainStep, after `warmup` steps, over `steps` steps,
// with `replicas` replicas (0: no strategy) on `threads` replica threads (0: one per core),
// batched per thread or not (MirroredStrategyOptions::batch_replica_rows).
double AllocationsPerStep(const std::string& workload, int replicas, int threads = 0,
                          bool batch = true) {
  auto context = tower::testing::MakeContextWithFakeGpus({});
  TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0],
      std::vector<LogicalDeviceConfiguration>(std::max(replicas, 1))));
  ScopedDefaultContext use(*context);
  std::unique_ptr<MirroredStrategy> strategy;
  if (replicas > 0) {
    MirroredStrategyOptions options;
    options.context = context.get();
    options.replica_threads = threads;
    options.batch_replica_rows = batch;
    strategy = std::move(MirroredStrategy::Create(options)).value();
  }
  std::vector<std::shared_ptr<Layer>> layers;
  if (workload == "mlp") {
    layers.push_back(Dense(64, "relu"));
    layers.push_back(Dense(64, "relu"));
  }
  layers.push_back(Dense(1));
  Sequential model(std::move(layers), 0);
  {
    std::unique_ptr<DistributionScope> scope;
    if (strategy != nullptr) scope = strategy->Scope();
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.01f)));
  }
  data::SyntheticOptions data;
  data.name = workload;
  data.rows = 4 * 64;
  data.seed = 3;
  const data::Dataset dataset = data::Dataset::Synthetic(data)->Batch(64);
  TOWER_CHECK_OK(model.Build(dataset.feature_dim()));
  std::vector<data::Batch> batches;
  auto iterator = std::move(dataset.MakeIterator()).value();
  while (true) {
    auto batch = std::move(iterator->Next()).value();
    if (!batch.has_value()) break;
    batches.push_back(std::move(*batch));
  }
  for (int step = 0; step < 5; ++step) TOWER_CHECK_OK(model.TrainStep(batches[step % 4]).status());
  constexpr int kSteps = 40;
  CountAllocations counter;
  for (int step = 0; step < kSteps; ++step) {
    TOWER_CHECK_OK(model.TrainStep(batches[step % 4]).status());
  }
  return static_cast<double>(counter.count()) / kSteps;
}

TEST(SteadyStateAllocationsTest, AStepAllocatesNothing) {
  if (!CountAllocations::available()) GTEST_SKIP() << "sanitizers own malloc: nothing to count";
  for (const std::string workload : {"linreg", "mlp"}) {
    for (int replicas : {0, 1, 2, 4}) {
      const double measured = AllocationsPerStep(workload, replicas);
      std::printf("%s, %d replicas: %.2f allocations per step\n", workload.c_str(), replicas,
                  measured);
      EXPECT_EQ(measured, 0) << workload << ", " << replicas << " replicas (0: no strategy)";
      if (replicas < 2) continue;
      const double unbatched = AllocationsPerStep(workload, replicas, 0, /*batch=*/false);
      std::printf("%s, %d replicas unbatched: %.2f allocations per step\n", workload.c_str(),
                  replicas, unbatched);
      EXPECT_EQ(unbatched, 0) << workload << ", " << replicas << " replicas, unbatched";
    }
    // Fibers, whatever the cores: 2 threads.
    for (int replicas : {4, 8}) {
      for (bool batch : {true, false}) {
        const double measured = AllocationsPerStep(workload, replicas, 2, batch);
        std::printf("%s, %d replicas on 2 threads%s: %.2f allocations per step\n",
                    workload.c_str(), replicas, batch ? ", batched" : "", measured);
        EXPECT_EQ(measured, 0) << workload << ", " << replicas << " replicas on 2 threads"
                               << (batch ? ", batched" : "");
      }
    }
  }
}

// The counter counts: one allocation made in the window is seen, from any thread.
TEST(SteadyStateAllocationsTest, TheCounterSeesAllocations) {
  if (!CountAllocations::available()) GTEST_SKIP() << "sanitizers own malloc: nothing to count";
  CountAllocations counter;
  auto p = std::make_unique<std::vector<int>>(100);
  std::thread([] { std::string s(1000, 'x'); }).join();
  EXPECT_GE(counter.count(), 3);
}

}  // namespace
}  // namespace tower
