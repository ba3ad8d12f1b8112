// The classic first Keras program, in C++: a Dense(1) model learns y = 3x + 2 from noisy
// samples with SGD(0.2) and mean squared error, then prints the line it found.
//
//   ./bazelw run //examples:linear_regression
//   ./bazelw run //examples:linear_regression -- --replicas=2   # MirroredStrategy
//
// With --replicas=N the model is built under a MirroredStrategy scope (TensorFlow's
// `with strategy.scope():`): N logical CPUs, or N virtual GPUs on a machine with a GPU.
#include <cstdio>
#include <iostream>
#include <memory>

#include "data/dataset.h"
#include "device/config.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "device/device_flags.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/replica_devices.h"
#include "strategy/strategy_from_environment.h"
#include "util/flags.h"

namespace {

struct Options {
  int64_t replicas = 1;
  int64_t epochs = 5;
  int64_t rows = 2000;
  int64_t batch = 32;
  int64_t seed = 0;
  bool log_device_placement = false;
  tower::DeviceFlags devices;
};

tower::Status Train(const Options& options) {
  TOWER_ASSIGN_OR_RETURN(std::vector<std::string> devices,
                         tower::ConfigureReplicaDevices(options.replicas, options.devices,
                                                  tower::Context::Global()));
  tower::config::SetLogDevicePlacement(options.log_device_placement);

  // x ~ U(-1, 1), y = 3x + 2 + 0.01·N(0, 1), in global batches of `batch` rows.
  tower::data::SyntheticOptions linreg;
  linreg.name = "linreg";
  linreg.rows = options.rows;
  linreg.seed = static_cast<uint64_t>(options.seed);
  TOWER_ASSIGN_OR_RETURN(tower::data::Dataset dataset, tower::data::Dataset::Synthetic(linreg));

  std::unique_ptr<tower::MirroredStrategy> strategy;
  std::unique_ptr<tower::DistributionScope> scope;
  tower::MirroredStrategyOptions mirrored;
  mirrored.devices = devices;
  if (tower::LaunchedByMpirun() || !devices.empty()) {
    // Under mpirun -np N every process is a worker of one MultiWorkerMirroredStrategy.
    TOWER_ASSIGN_OR_RETURN(strategy, tower::CreateStrategyFromEnvironment(mirrored));
  }
  if (strategy != nullptr) scope = strategy->Scope();  // with strategy.scope():
  tower::Sequential model({tower::Dense(1)}, static_cast<uint64_t>(options.seed));
  TOWER_RETURN_IF_ERROR(model.Compile(tower::MeanSquaredErrorLoss(), tower::SGD(0.2f)));
  scope.reset();

  tower::FitOptions fit;
  fit.epochs = static_cast<int>(options.epochs);
  TOWER_ASSIGN_OR_RETURN(tower::History history,
                         model.Fit(dataset.Shuffle(options.rows, 1).Batch(options.batch), fit));
  TOWER_ASSIGN_OR_RETURN(std::vector<float> w, model.trainable_variables()[0]->Read());
  TOWER_ASSIGN_OR_RETURN(std::vector<float> b, model.trainable_variables()[1]->Read());
  if (strategy == nullptr || strategy->is_chief()) {
    std::printf("w=%.2f b=%.2f (the data follow y = 3x + 2)\n", w[0], b[0]);
  }
  return tower::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  tower::FlagParser parser("linear_regression");
  parser.AddInt("replicas", &options.replicas, "replicas to train on (MirroredStrategy when > 1)");
  parser.AddInt("epochs", &options.epochs, "passes over the data");
  parser.AddInt("rows", &options.rows, "samples of y = 3x + 2 + noise");
  parser.AddInt("batch", &options.batch, "global batch size (split across replicas)");
  parser.AddInt("seed", &options.seed, "seed of the data and the initial weights");
  parser.AddBool("log-device-placement", &options.log_device_placement,
                 "print where every op runs");
  tower::AddDeviceFlags(&parser, &options.devices);
  tower::Status status = parser.Parse(argc, argv, 1);
  if (status.ok() && !parser.help_requested()) {
    if (options.epochs < 1 || options.rows < 1 || options.batch < 1) {
      status = tower::InvalidArgumentError("--epochs, --rows and --batch must be positive");
    }
  }
  if (status.ok()) status = tower::ApplyDeviceFlags(options.devices, tower::Context::Global());
  if (!status.ok() || parser.help_requested()) {
    std::cerr << (status.ok() ? "" : "error: " + status.message() + "\n") << parser.Usage();
    return status.ok() ? 0 : 2;
  }
  status = Train(options);
  if (!status.ok()) {
    std::cerr << "error: " << status << "\n";
    return 1;
  }
  return 0;
}
