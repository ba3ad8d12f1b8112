// TensorFlow 1's multi-GPU loop (cifar10_multi_gpu_train), in C++: the variables
// live on /CPU:0; each step splits the batch across the towers, every tower computes its loss
// and gradients on its own device, the tower gradients are averaged on the CPU, and the
// update is applied once.
//
//   ./bazelw run //examples:tower_training                  # 2 towers: logical CPUs or GPUs
//   ./bazelw run //examples:tower_training -- --towers=4
#include <cstdio>
#include <iostream>

#include "data/dataset.h"
#include "device/context.h"
#include "device/device_flags.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/replica_devices.h"
#include "model/towers.h"
#include "util/flags.h"

namespace {

tower::Status Run(int64_t towers, int64_t steps, const tower::DeviceFlags& device_flags) {
  tower::Context& context = tower::Context::Global();
  TOWER_ASSIGN_OR_RETURN(std::vector<std::string> tower_names,
                         tower::ConfigureReplicaDevices(towers, device_flags, context));
  if (tower_names.empty()) tower_names = {"/CPU:0"};
  std::vector<tower::Device*> devices;
  for (const std::string& name : tower_names) {
    TOWER_ASSIGN_OR_RETURN(tower::Device * device, context.FindDevice(name));
    devices.push_back(device);
  }
  TOWER_ASSIGN_OR_RETURN(tower::Device * cpu, context.FindDevice("/CPU:0"));

  // The variables on /CPU:0 (TF1: tf.device('/cpu:0') around the variable creation).
  TOWER_ASSIGN_OR_RETURN(auto on_cpu, tower::OneDeviceStrategy::Create("/CPU:0"));
  tower::Sequential model({tower::Dense(1)});
  {
    auto scope = on_cpu->Scope();
    TOWER_RETURN_IF_ERROR(model.Compile(tower::MeanSquaredErrorLoss(), tower::SGD(0.2f)));
  }
  TOWER_RETURN_IF_ERROR(model.Build(1));

  tower::data::SyntheticOptions linreg;
  linreg.name = "linreg";
  TOWER_ASSIGN_OR_RETURN(tower::data::Dataset dataset, tower::data::Dataset::Synthetic(linreg));
  TOWER_ASSIGN_OR_RETURN(auto iterator, dataset.Batch(64).MakeIterator());
  std::printf("%zu towers:", devices.size());
  for (tower::Device* device : devices) std::printf(" %s", device->full_name().c_str());
  std::printf("\n");
  for (int64_t step = 1; step <= steps; ++step) {
    TOWER_ASSIGN_OR_RETURN(std::optional<tower::data::Batch> batch, iterator->Next());
    const std::vector<tower::data::Batch> shards =
        tower::SplitBatch(*batch, static_cast<int>(devices.size()));
    std::vector<tower::TowerGradients> tower_grads;
    double loss = 0;
    for (size_t i = 0; i < devices.size(); ++i) {  // for i in range(FLAGS.num_gpus):
      TOWER_ASSIGN_OR_RETURN(tower::TowerGradients grads,
                             tower::ComputeTowerGradients(model, shards[i], devices[i]));
      loss += grads.loss / static_cast<double>(devices.size());
      tower_grads.push_back(std::move(grads));
    }
    TOWER_ASSIGN_OR_RETURN(std::vector<tower::Tensor> averaged,
                           tower::AverageGradients(tower_grads, cpu));
    TOWER_RETURN_IF_ERROR(model.ApplyGradients(averaged));  // apply once
    if (step % 20 == 0 || step == 1) std::printf("step %3lld  loss %.6f\n", static_cast<long long>(step), loss);
  }
  TOWER_ASSIGN_OR_RETURN(std::vector<float> w, model.trainable_variables()[0]->Read());
  TOWER_ASSIGN_OR_RETURN(std::vector<float> b, model.trainable_variables()[1]->Read());
  std::printf("w=%.2f b=%.2f (the data follow y = 3x + 2)\n", w[0], b[0]);
  return tower::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t towers = 2;
  int64_t steps = 100;
  tower::DeviceFlags device_flags;
  tower::FlagParser parser("tower_training");
  parser.AddInt("towers", &towers, "towers (logical CPUs, or GPUs / virtual GPUs where there are GPUs)");
  parser.AddInt("steps", &steps, "training steps");
  tower::AddDeviceFlags(&parser, &device_flags);
  tower::Status status = parser.Parse(argc, argv, 1);
  if (status.ok() && steps < 1) status = tower::InvalidArgumentError("--steps must be positive");
  if (status.ok()) status = tower::ApplyDeviceFlags(device_flags, tower::Context::Global());
  if (!status.ok() || parser.help_requested()) {
    std::cerr << (status.ok() ? "" : "error: " + status.message() + "\n") << parser.Usage();
    return status.ok() ? 0 : 2;
  }
  status = Run(towers, steps, device_flags);
  if (!status.ok()) {
    std::cerr << "error: " << status << "\n";
    return 1;
  }
  return 0;
}
