// A one-GPU training step reads its loss once forward has computed it and returns while its
// backward and update still run on the device (Sequential::set_step_waits_for_device), with
// the bits of a step that waits for all its work; several replicas still wait.
//
// Seen without timing: in the early run each step's last kernel launch is held on the device
// (cudaemu::testing::HoldLaunch) until the test releases it, after the step has returned. A
// step that returned early leaves that launch queued, whatever the machine's load; a step that
// waited for all its work would wait for the held launch (its hold ends after a limit, so the
// test fails instead of hanging). Sequential::WaitForDevices leaves no work queued. On a card
// the launches cannot be held, so that case runs only under the emulation; the bits of an early
// step against a waiting one, and several replicas waiting, are checked on a card too.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include <gtest/gtest.h>

#include "device/context.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/mirrored_strategy.h"
#include "tests/testing/emulation.h"
#include "tests/testing/gpu.h"
#include "tests/testing/gpu_contexts.h"

#ifdef CUDAEMU
#include <cudaemu/testing.h>
#endif

namespace tower {
namespace {

using testing::RealGpuContext;

struct Trained {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
  std::vector<int64_t> launches;  // kernel launches of each step (counted under the emulation)
  int steps_left_running = 0;     // steps whose stream still had work when they returned
};

#ifdef CUDAEMU
// How long a held launch waits for the test before it runs anyway: far beyond a step's time,
// so it only ends a test whose step waited for its own held launch (a failure, not a hang).
constexpr std::chrono::seconds kHoldLimit(20);
#endif

// `steps` steps of a small MLP on `replicas` virtual GPUs (0: one GPU, no strategy). With
// `hold_last_launch` (one GPU, under the emulation), step s holds its launch number
// hold_last_launch[s] (counted from the step's start) until the step has returned and its
// stream was queried.
Trained Train(int replicas, bool wait, int steps,
              const std::vector<int64_t>& hold_last_launch = {}) {
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
    const bool hold = static_cast<size_t>(s) < hold_last_launch.size();
#ifdef CUDAEMU
    if (hold) cudaemu::testing::HoldLaunch(hold_last_launch[s], kHoldLimit);
    const int64_t launches_before = cudaemu::testing::KernelLaunches();
#endif
    StatusOr<double> loss = model.TrainStep(*batch);
#ifdef CUDAEMU
    run.launches.push_back(cudaemu::testing::KernelLaunches() - launches_before);
#endif
    // Right after the step returns: is any of its work still queued on a replica's stream?
    bool running = false;
    for (int r = 0; r < std::max(replicas, 1); ++r) {
      auto* stream = static_cast<cudaStream_t>(gpus[r]->stream().native_handle());
      const cudaError_t state = cudaStreamQuery(stream);
      EXPECT_TRUE(state == cudaSuccess || state == cudaErrorNotReady) << cudaGetErrorString(state);
      if (state == cudaErrorNotReady) running = true;
    }
#ifdef CUDAEMU
    if (hold) {
      // The held launch is the step's own last one, and its stream reaches it: the step
      // returned with the launch still queued, not after a limit that let it run.
      EXPECT_EQ(run.launches.back(), hold_last_launch[s])
          << "step " << s << " launched other kernels than the step that waited";
      const auto start = std::chrono::steady_clock::now();
      while (!cudaemu::testing::LaunchIsHeld() &&
             std::chrono::steady_clock::now() - start < kHoldLimit) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      EXPECT_TRUE(cudaemu::testing::ReleaseHeldLaunch())
          << "step " << s << " waited for its own last kernel (held until the limit)";
    }
#else
    EXPECT_FALSE(hold) << "launches are held only under the emulation";
#endif
    TOWER_CHECK_OK(loss.status());
    run.losses.push_back(*loss);
    if (running) ++run.steps_left_running;
    if (::testing::Test::HasFailure()) break;
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

bool HaveGpu() { return RealGpuContext() != nullptr; }

// Without holding launches (so on a card too): reading the loss early changes no bit.
TEST(EarlyLossReadTest, OneGpuStepThatReadsItsLossEarlyGivesTheSameBits) {
  if (!HaveGpu()) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
  const int steps = 6;
  const Trained waited = Train(0, /*wait=*/true, steps);
  EXPECT_EQ(waited.steps_left_running, 0) << "a step that waits left work on its stream";
  const Trained early = Train(0, /*wait=*/false, steps);
  EXPECT_EQ(early.losses, waited.losses);
  EXPECT_EQ(early.weights, waited.weights);
}

TEST(EarlyLossReadTest, OneGpuStepReturnsBeforeBackwardWithTheSameBits) {
#ifdef CUDAEMU
  const int steps = 6;
  const Trained waited = Train(0, /*wait=*/true, steps);
  EXPECT_EQ(waited.steps_left_running, 0) << "a step that waits left work on its stream";
  for (int64_t launches : waited.launches) ASSERT_GT(launches, 0);
  // Each early step's last launch (its update's) is held until the step has returned.
  const Trained early = Train(0, /*wait=*/false, steps, waited.launches);
  EXPECT_EQ(early.steps_left_running, steps) << "the loss was not read before backward ended";
  EXPECT_EQ(early.losses, waited.losses);
  EXPECT_EQ(early.weights, waited.weights);
#else
  TOWER_SKIP_NEEDS_EMULATION("kernel launches held on the device and their count "
                             "(cudaemu::testing::HoldLaunch, KernelLaunches): on a card, "
                             "whether a step left work queued is a matter of timing");
#endif
}

TEST(EarlyLossReadTest, SeveralReplicasStillWaitForTheirStep) {
  if (!HaveGpu()) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
  // Their loss is summed in the last gradient bucket, after backward.
  const Trained run = Train(2, /*wait=*/false, 3);
  EXPECT_EQ(run.steps_left_running, 0);
}

}  // namespace
}  // namespace tower
