// MirroredStrategy: synchronous data parallelism over the logical devices of one process
// (TensorFlow's tf.distribute.MirroredStrategy): what users call.
//
//   auto strategy = tower::MirroredStrategy::Create();  // all logical GPUs, else all CPUs
//   {
//     auto scope = (*strategy)->Scope();                // `with strategy.scope():`
//     model.Compile(...);                               // variables mirrored per replica
//   }
//   model.Fit(dataset);                                 // data-parallel, no other change
//
// A strategy's replicas, world and collectives, and the Distribution a model's steps run on,
// are its extended() side (mirrored_extended.h; TensorFlow's `strategy.extended`): what
// implementers call. Across workers (MultiWorkerMirroredStrategy, strategy/collectives/mpi)
// Reduce and the global replica count are collectives over every worker.
#ifndef TOWER_STRATEGY_MIRRORED_STRATEGY_H_
#define TOWER_STRATEGY_MIRRORED_STRATEGY_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "strategy/mirrored_extended.h"
#include "strategy/mirrored_strategy_options.h"
#include "strategy/per_replica.h"
#include "strategy/step/distribution.h"

namespace tower {

// One replica's shard of a global batch, on the replica's device.
struct ReplicaBatch {
  Tensor features;  // [rows, feature_dim]
  Tensor targets;   // [rows, target_dim], as the data holds them
  RowRange rows;    // which rows of the global batch these are
  int64_t global_batch_size = 0;
};

enum class ReduceOp { kSum, kMean };

class DistributedDataset;

class MirroredStrategy {
 public:
  // Over this process alone.
  static StatusOr<std::unique_ptr<MirroredStrategy>> Create(
      const MirroredStrategyOptions& options = MirroredStrategyOptions());
  // A strategy over replicas a factory assembled (MirroredExtended::Assemble).
  explicit MirroredStrategy(std::unique_ptr<MirroredExtended> extended);
  ~MirroredStrategy();

  // "MirroredStrategy(<device>, ...)", and the worker across workers.
  std::string Describe() const { return extended_->Describe(); }
  // Replicas of every worker that sum their gradients each step.
  int num_replicas_in_sync() const { return extended_->num_replicas_in_sync(); }
  // This process's replicas' devices (`strategy.extended.worker_devices`).
  const std::vector<Device*>& devices() const { return extended_->devices(); }
  // Whether this worker is the chief (rank 0; the only one in one process), the one that
  // writes files and prints results.
  bool is_chief() const { return extended_->is_chief(); }
  // `with strategy.scope():` models compiled under it replicate their variables.
  std::unique_ptr<DistributionScope> Scope() {
    return std::make_unique<DistributionScope>(*extended_);
  }
  // strategy.run(fn): fn runs on every local replica (under a DeviceScope of its device)
  // and its values come back per local replica.
  template <typename T>
  StatusOr<PerReplica<T>> Run(const std::function<StatusOr<T>(ReplicaContext&)>& fn);
  // strategy.reduce: the sum, or the mean over num_replicas_in_sync(), of one value per
  // replica of every worker (`values` holds this worker's local replicas'), on /CPU:0 (or
  // `destination`). Across workers it is a collective: every worker calls it in turn.
  StatusOr<Tensor> Reduce(ReduceOp op, const PerReplica<Tensor>& values,
                          Device* destination = nullptr);
  StatusOr<double> Reduce(ReduceOp op, const PerReplica<double>& values);
  // strategy.experimental_distribute_dataset: each global batch split into per-replica
  // shards (Distribution::ShardRows), in order, on the local replicas' devices. Every
  // worker iterates the same global batches and takes its own replicas' rows.
  DistributedDataset DistributeDataset(const data::Dataset& dataset);

  // `strategy.extended`: the replicas, the world, the collectives (implementers' API).
  MirroredExtended& extended() const { return *extended_; }

 private:
  Status CheckLocalValues(int values) const;

  std::unique_ptr<MirroredExtended> extended_;
};

// TensorFlow's OneDeviceStrategy: one replica, on the calling thread.
class OneDeviceStrategy {
 public:
  static StatusOr<std::unique_ptr<MirroredStrategy>> Create(const std::string& device,
                                                            Context* context = nullptr);
};

// Iterates a dataset as per-replica shards (see MirroredStrategy::DistributeDataset).
class DistributedDataset {
 public:
  DistributedDataset(MirroredStrategy* strategy, data::Dataset dataset)
      : strategy_(strategy), dataset_(std::move(dataset)) {}
  // Starts a pass (epoch `epoch`).
  Status Begin(int64_t epoch = 0);
  // The next global batch as shards (a replica may get zero rows on an uneven final batch),
  // or nullopt at the end of the pass.
  StatusOr<std::optional<PerReplica<ReplicaBatch>>> Next();

 private:
  MirroredStrategy* strategy_;
  data::Dataset dataset_;
  std::unique_ptr<data::Iterator> iterator_;
};

template <typename T>
StatusOr<PerReplica<T>> MirroredStrategy::Run(
    const std::function<StatusOr<T>(ReplicaContext&)>& fn) {
  std::vector<std::optional<T>> values(devices().size());
  TOWER_RETURN_IF_ERROR(extended_->RunOnReplicas([&](ReplicaContext& ctx) -> Status {
    StatusOr<T> value = fn(ctx);
    if (!value.ok()) return value.status();
    values[ctx.replica_id()] = std::move(value).value();
    return OkStatus();
  }));
  std::vector<T> out;
  out.reserve(values.size());
  for (auto& value : values) out.push_back(std::move(*value));
  return PerReplica<T>(std::move(out));
}

}  // namespace tower

#endif  // TOWER_STRATEGY_MIRRORED_STRATEGY_H_
