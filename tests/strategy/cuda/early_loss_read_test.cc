// A one-GPU training step reads its loss once forward has computed it and returns while its
// backward and update still run on the device (Sequential::set_step_waits_for_device), with
// the bits of a step that waits for all its work; several replicas still wait. Under the
// emulation with every stream item delayed a random 0..2 ms (CUDAEMU_STREAM_DELAY_US, at
// least that for the first test, whatever the environment): a step
// that returned early leaves work on its stream, one that waited leaves none, and
// Sequential::WaitForDevices leaves none either.
#include <cuda_runtime_api.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "device/context.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/mirrored_strategy.h"
#include "tests/testing/gpu_contexts.h"

namespace tower {
namespace {

using testing::RealGpuContext;

struct Trained {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
  int steps_left_running = 0;  // steps whose stream still had work when they returned
};

// `steps` steps of a small MLP on `replicas` virtual GPUs (0: one GPU, no strategy).
Trained Train(int replicas, bool wait, int steps) {
  auto context = RealGpuContext(std::max(replicas, 1));
  ScopedDefaultContext use(*context);
  data::SyntheticOptions mlp;
  mlp.name = "mlp";
  mlp.rows = 32 * steps;
  mlp.seed = 3;
  std::unique_ptr<data::Iterator> iterator =
      std::move(data::Dataset::Synthetic(mlp)->Batch(32).MakeIterator()).value();
  Sequential model({Dense(16, "relu"), Dense(8, "relu"), Dense(1)}, 7);
  model.set_step_waits_for_device(wait);
  std::unique_ptr<MirroredStrategy> strategy;
  std::vector<Device*> gpus = *context->Devices("GPU");
  if (replicas > 0) {
    MirroredStrategyOptions options;
    options.context = context.get();
    for (int r = 0; r < replicas; ++r) options.devices.push_back(gpus[r]->full_name());
    strategy = std::move(MirroredStrategy::Create(options)).value();
    auto scope = strategy->Scope();
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.01f)));
  } else {
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.01f)));
  }
  Trained run;
  for (int s = 0; s < steps; ++s) {
    std::optional<data::Batch> batch = *iterator->Next();
    StatusOr<double> loss = model.TrainStep(*batch);
    // Right after the step returns: is any of its work still queued on a replica's stream?
    bool running = false;
    for (int r = 0; r < std::max(replicas, 1); ++r) {
      auto* stream = static_cast<cudaStream_t>(gpus[r]->stream().native_handle());
      const cudaError_t state = cudaStreamQuery(stream);
      EXPECT_TRUE(state == cudaSuccess || state == cudaErrorNotReady) << cudaGetErrorString(state);
      if (state == cudaErrorNotReady) running = true;
    }
    TOWER_CHECK_OK(loss.status());
    run.losses.push_back(*loss);
    if (running) ++run.steps_left_running;
  }
  // WaitForDevices leaves nothing queued on any replica's stream.
  TOWER_CHECK_OK(model.WaitForDevices());
  for (int r = 0; r < std::max(replicas, 1); ++r) {
    auto* stream = static_cast<cudaStream_t>(gpus[r]->stream().native_handle());
    EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess) << "work left after WaitForDevices";
  }
  for (Variable* variable : model.trainable_variables()) run.weights.push_back(*variable->Read());
  return run;
}

// What the first test checks needs the backward's stream items to outlast the host's return
// from the step: up to 2 ms each (BUILD's setting). The shaken CI runs give every test
// 200 µs (CUDAEMU_STREAM_DELAY_US), with which a whole backward sometimes finished first
// (5 of 6 steps left work, once in 10 runs); a shorter setting is raised here, before any
// stream exists (the emulation reads it when a stream starts). The delays stay random.
void AtLeastTwoMillisecondsPerStreamItem() {
  const char* delay = std::getenv("CUDAEMU_STREAM_DELAY_US");
  if (delay == nullptr || std::atoll(delay) < 2000) {
    setenv("CUDAEMU_STREAM_DELAY_US", "2000", /*overwrite=*/1);
  }
}

TEST(EarlyLossReadTest, OneGpuStepReturnsBeforeBackwardWithTheSameBits) {
  AtLeastTwoMillisecondsPerStreamItem();
  const int steps = 6;
  const Trained waited = Train(0, /*wait=*/true, steps);
  const Trained early = Train(0, /*wait=*/false, steps);
  EXPECT_EQ(waited.steps_left_running, 0) << "a step that waits left work on its stream";
  // Each of the early steps returned with its backward still queued (delays of 0..2 ms per
  // item; the backward of 3 layers is over a dozen items).
  EXPECT_EQ(early.steps_left_running, steps) << "the loss was not read before backward ended";
  EXPECT_EQ(early.losses, waited.losses);
  EXPECT_EQ(early.weights, waited.weights);
}

TEST(EarlyLossReadTest, SeveralReplicasStillWaitForTheirStep) {
  // Their loss is summed in the last gradient bucket, after backward.
  const Trained run = Train(2, /*wait=*/false, 3);
  EXPECT_EQ(run.steps_left_running, 0);
}

}  // namespace
}  // namespace tower
