// TensorFlow's "simulate multi-GPU on one GPU": split one card into two logical GPUs of a
// fixed memory size, build a MirroredStrategy over them, and train. On a machine without a
// GPU it says so and splits the CPU into two logical CPUs (with the same memory limits)
// instead: the code path is the same.
//
//   ./bazelw run //examples:virtual_gpus
//   ./bazelw run --config=cuda //examples:virtual_gpus -- --memory-limit=1024
#include <cstdio>
#include <iostream>

#include "data/dataset.h"
#include "device/config.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/mirrored_strategy.h"
#include "util/flags.h"

namespace {

tower::Status Run(int64_t count, int64_t memory_limit_mb, int64_t steps) {
  // gpus = tf.config.list_physical_devices('GPU')
  const auto gpus = tower::config::ListPhysicalDevices("GPU");
  const std::vector<tower::LogicalDeviceConfiguration> configs(
      count, tower::LogicalDeviceConfiguration{memory_limit_mb});
  if (!gpus.empty()) {
    // Create `count` virtual GPUs with memory_limit_mb each on the first GPU.
    TOWER_RETURN_IF_ERROR(tower::config::SetLogicalDeviceConfiguration(gpus[0], configs));
  } else {
    std::printf("No GPU here (%s): using %lld logical CPUs of %lld MiB instead.\n",
                tower::Context::Global().GetPlatform("GPU")->status().message().c_str(),
                static_cast<long long>(count), static_cast<long long>(memory_limit_mb));
    TOWER_RETURN_IF_ERROR(tower::config::SetLogicalDeviceConfiguration(
        tower::config::ListPhysicalDevices("CPU")[0], configs));
  }
  TOWER_ASSIGN_OR_RETURN(std::vector<tower::LogicalDevice> logical,
                         tower::config::ListLogicalDevices(gpus.empty() ? "CPU" : "GPU"));
  std::printf("%zu Physical GPU, %zu Logical %s\n", gpus.size(), logical.size(),
              gpus.empty() ? "CPUs" : "GPUs");

  TOWER_ASSIGN_OR_RETURN(auto strategy, tower::MirroredStrategy::Create());
  tower::Sequential model({tower::Dense(64, "relu"), tower::Dense(1)});
  {
    auto scope = strategy->Scope();
    TOWER_RETURN_IF_ERROR(model.Compile(tower::MeanSquaredErrorLoss(), tower::SGD(0.002f)));
  }
  tower::data::SyntheticOptions mlp;
  mlp.name = "mlp";
  TOWER_ASSIGN_OR_RETURN(tower::data::Dataset dataset, tower::data::Dataset::Synthetic(mlp));
  tower::FitOptions fit;
  fit.steps_per_epoch = steps;
  fit.epochs = 2;
  TOWER_ASSIGN_OR_RETURN(tower::History history, model.Fit(dataset.Batch(64), fit));
  for (int r = 0; r < strategy->num_replicas_in_sync(); ++r) {
    const tower::AllocatorStats stats = strategy->devices()[r]->allocator().GetStats();
    std::printf("%s: peak %.1f MiB of its %lld MiB limit\n",
                strategy->devices()[r]->full_name().c_str(),
                stats.peak_bytes_in_use / 1048576.0, static_cast<long long>(memory_limit_mb));
  }
  return tower::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t count = 2;
  int64_t memory_limit_mb = 1024;
  int64_t steps = 50;
  tower::FlagParser parser("virtual_gpus");
  parser.AddInt("devices", &count, "logical devices to carve out of the card (or the CPU)");
  parser.AddInt("memory-limit", &memory_limit_mb, "memory of each, in MiB");
  parser.AddInt("steps", &steps, "training steps per epoch");
  tower::Status status = parser.Parse(argc, argv, 1);
  if (status.ok() && (count < 1 || memory_limit_mb < 1 || steps < 1)) {
    status = tower::InvalidArgumentError("--devices, --memory-limit and --steps must be positive");
  }
  if (!status.ok() || parser.help_requested()) {
    std::cerr << (status.ok() ? "" : "error: " + status.message() + "\n") << parser.Usage();
    return status.ok() ? 0 : 2;
  }
  status = Run(count, memory_limit_mb, steps);
  if (!status.ok()) {
    std::cerr << "error: " << status << "\n";
    return 1;
  }
  return 0;
}
