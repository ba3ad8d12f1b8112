// A custom training loop under a distribution strategy, in the spirit of TensorFlow's
// "Custom training with tf.distribute.Strategy": the loop is yours, the strategy splits the
// data, runs your step on every replica and sums what you ask it to.
//
//   ./bazelw run //examples:custom_training_loop -- --replicas=4
//   mpirun -np 2 bazel-bin/examples/custom_training_loop --replicas=2   # 2 workers × 2
//
// Each global batch is split into per-replica shards (DistributeDataset); on every replica
// (strategy.Run) the step computes the shard's loss and gradients, both divided by the
// global batch size, and applies them (ApplyGradients sums the gradients over every replica
// of every worker first); the per-replica losses are summed (Reduce) into the batch's mean
// loss. 2 workers × 2 replicas train exactly as 4 replicas in one process, and as one device.
#include <cstdio>
#include <iostream>
#include <memory>

#include "data/dataset.h"
#include "device/context.h"
#include "device/device_flags.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/replica_devices.h"
#include "strategy/strategy_from_environment.h"
#include "util/flags.h"

namespace {

struct Options {
  int64_t replicas = 2;
  int64_t epochs = 3;
  int64_t rows = 610;  // 9 full batches of 64 and a final one of 34, uneven over 4 replicas
  int64_t global_batch = 64;
  double learning_rate = 0.05;
  int64_t seed = 0;
  std::string save;
  tower::DeviceFlags devices;
};

tower::Status Train(const Options& options) {
  tower::MirroredStrategyOptions strategy_options;
  TOWER_ASSIGN_OR_RETURN(strategy_options.devices,
                         tower::ConfigureReplicaDevices(options.replicas, options.devices,
                                                        tower::Context::Global()));
  // Under mpirun every process is one worker; --replicas counts its own replicas.
  TOWER_ASSIGN_OR_RETURN(std::unique_ptr<tower::MirroredStrategy> strategy,
                         tower::CreateStrategyFromEnvironment(strategy_options));

  // x ~ U(-1, 1)^256, y = a small random MLP of x (the `mlp` benchmark's data).
  tower::data::SyntheticOptions mlp;
  mlp.name = "mlp";
  mlp.rows = options.rows;
  mlp.seed = static_cast<uint64_t>(options.seed);
  TOWER_ASSIGN_OR_RETURN(tower::data::Dataset dataset, tower::data::Dataset::Synthetic(mlp));

  tower::Sequential model({tower::Dense(32, "tanh"), tower::Dense(1)},
                          static_cast<uint64_t>(options.seed));
  {
    auto scope = strategy->Scope();  // with strategy.scope(): variables on every replica
    TOWER_RETURN_IF_ERROR(model.Compile(tower::MeanSquaredErrorLoss(),
                                        tower::SGD(static_cast<float>(options.learning_rate))));
  }
  TOWER_RETURN_IF_ERROR(model.Build(dataset.feature_dim()));

  // Every worker reads the same global batches (same seed) and takes its replicas' rows.
  tower::DistributedDataset batches = strategy->DistributeDataset(
      dataset.Shuffle(options.rows, static_cast<uint64_t>(options.seed))
          .Batch(options.global_batch));
  for (int64_t epoch = 0; epoch < options.epochs; ++epoch) {
    TOWER_RETURN_IF_ERROR(batches.Begin(epoch));
    double loss_sum = 0;
    int64_t steps = 0;
    while (true) {
      TOWER_ASSIGN_OR_RETURN(auto shards, batches.Next());
      if (!shards.has_value()) break;
      // The step, on every replica: its loss and gradients, then the synchronous update.
      TOWER_ASSIGN_OR_RETURN(
          tower::PerReplica<tower::Tensor> losses,
          strategy->Run<tower::Tensor>(
              [&](tower::ReplicaContext& ctx) -> tower::StatusOr<tower::Tensor> {
                const tower::ReplicaBatch& shard = (*shards)[ctx.replica_id()];
                TOWER_ASSIGN_OR_RETURN(tower::ReplicaGradients step,
                                       model.ComputeGradients(ctx, shard.features, shard.targets,
                                                              shard.global_batch_size));
                TOWER_RETURN_IF_ERROR(model.ApplyGradients(ctx, step.gradients));
                return step.loss;
              }));
      // Each replica's loss is its rows' share of the batch mean: their sum is the mean.
      TOWER_ASSIGN_OR_RETURN(tower::Tensor loss, strategy->Reduce(tower::ReduceOp::kSum, losses));
      TOWER_ASSIGN_OR_RETURN(std::vector<float> value, loss.ToHost());
      loss_sum += value[0];
      ++steps;
    }
    if (strategy->is_chief()) {
      std::printf("epoch %lld: loss=%.6f over %lld steps on %d replicas\n",
                  static_cast<long long>(epoch + 1), loss_sum / static_cast<double>(steps),
                  static_cast<long long>(steps), strategy->num_replicas_in_sync());
    }
  }
  if (!options.save.empty()) TOWER_RETURN_IF_ERROR(model.SaveWeights(options.save));
  return tower::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  tower::FlagParser parser("custom_training_loop");
  parser.AddInt("replicas", &options.replicas, "replicas of this process");
  parser.AddInt("epochs", &options.epochs, "passes over the data");
  parser.AddInt("rows", &options.rows, "rows of synthetic data");
  parser.AddInt("global-batch", &options.global_batch, "rows per step, over all replicas");
  parser.AddDouble("learning-rate", &options.learning_rate, "SGD's learning rate");
  parser.AddInt("seed", &options.seed, "seed of the data, the shuffle and the initial weights");
  parser.AddString("save", &options.save, "write the trained weights here (safetensors)");
  tower::AddDeviceFlags(&parser, &options.devices);
  tower::Status status = parser.Parse(argc, argv, 1);
  if (status.ok() && !parser.help_requested() &&
      (options.epochs < 1 || options.rows < 1 || options.global_batch < 1)) {
    status = tower::InvalidArgumentError("--epochs, --rows and --global-batch must be positive");
  }
  if (status.ok()) status = tower::ApplyDeviceFlags(options.devices, tower::Context::Global());
  if (!status.ok() || parser.help_requested()) {
    std::cerr << (status.ok() ? "" : "error: " + status.message() + "\n") << parser.Usage();
    if (!status.ok()) tower::AbortOtherWorkers(2);
    return status.ok() ? 0 : 2;
  }
  status = Train(options);
  if (!status.ok()) {
    std::cerr << "error: " << status << "\n";
    tower::AbortOtherWorkers(1);  // the other workers may wait for this one in a collective
    return 1;
  }
  return 0;
}
