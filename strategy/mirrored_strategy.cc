#include "strategy/mirrored_strategy.h"

#include <cstdio>
#include <cstdlib>

#include "device/context.h"
#include "device/placement.h"
#include "ops/math_ops.h"
#include "util/strings.h"

namespace tower {

namespace {

// A double as text that reads back to the same bits (for AllGather).
std::string ExactText(double value) {
  char text[40];
  std::snprintf(text, sizeof(text), "%a", value);
  return text;
}

}  // namespace

StatusOr<std::unique_ptr<MirroredStrategy>> MirroredStrategy::Create(
    const MirroredStrategyOptions& options) {
  TOWER_ASSIGN_OR_RETURN(MirroredExtended::LocalSetup setup,
                         MirroredExtended::PrepareLocal("MirroredStrategy", options));
  TOWER_ASSIGN_OR_RETURN(
      std::unique_ptr<MirroredExtended> extended,
      MirroredExtended::Assemble("MirroredStrategy", LocalWorld::Get(), std::move(setup)));
  return std::make_unique<MirroredStrategy>(std::move(extended));
}

MirroredStrategy::MirroredStrategy(std::unique_ptr<MirroredExtended> extended)
    : extended_(std::move(extended)) {}

MirroredStrategy::~MirroredStrategy() = default;

Status MirroredStrategy::CheckLocalValues(int values) const {
  const int local = extended_->num_local_replicas();
  if (values == local) return OkStatus();
  return InvalidArgumentError("Reduce: got " + std::to_string(values) + " values for " +
                              std::to_string(local) + " local replicas");
}

StatusOr<Tensor> MirroredStrategy::Reduce(ReduceOp op, const PerReplica<Tensor>& values,
                                          Device* destination) {
  TOWER_RETURN_IF_ERROR(CheckLocalValues(values.num_replicas()));
  World& world = extended_->world();
  if (destination == nullptr) {
    TOWER_ASSIGN_OR_RETURN(std::vector<Device*> cpus, extended_->context().Devices("CPU"));
    destination = cpus.front();
  }
  std::vector<Tensor> copies;
  for (const Tensor& value : values) {
    TOWER_ASSIGN_OR_RETURN(Tensor copy, value.CopyTo(destination));
    copies.push_back(std::move(copy));
  }
  DeviceScope scope(destination->full_name());
  TOWER_ASSIGN_OR_RETURN(Tensor sum, ops::AddN(copies));
  if (world.size() > 1) {
    // This worker's sum, then the sum over workers (on the host).
    TOWER_ASSIGN_OR_RETURN(std::vector<float> host, sum.ToHost());
    TOWER_RETURN_IF_ERROR(world.AllReduceSum(host.data(), static_cast<int64_t>(host.size()),
                                             extended_->collective_timeout(),
                                             "Reduce of a " + sum.shape().ToString() + " tensor"));
    TOWER_ASSIGN_OR_RETURN(sum, Tensor::FromHost(destination, sum.shape(), host));
  }
  if (op == ReduceOp::kSum) return sum;
  return ops::Scale(sum, 1.0f / static_cast<float>(num_replicas_in_sync()));
}

StatusOr<double> MirroredStrategy::Reduce(ReduceOp op, const PerReplica<double>& values) {
  TOWER_RETURN_IF_ERROR(CheckLocalValues(values.num_replicas()));
  // Every replica's value, in global replica order, summed in that order on every worker:
  // the same bits everywhere.
  std::string mine;
  for (double value : values) mine += ExactText(value) + " ";
  TOWER_ASSIGN_OR_RETURN(
      std::vector<std::string> all,
      extended_->world().AllGather(mine, extended_->collective_timeout(), "Reduce of a scalar"));
  double sum = 0;
  for (const std::string& worker : all) {
    for (const std::string& text : Split(worker, ' ')) {
      if (!text.empty()) sum += std::strtod(text.c_str(), nullptr);
    }
  }
  return op == ReduceOp::kSum ? sum : sum / num_replicas_in_sync();
}

DistributedDataset MirroredStrategy::DistributeDataset(const data::Dataset& dataset) {
  return DistributedDataset(this, dataset);
}

Status DistributedDataset::Begin(int64_t epoch) {
  TOWER_ASSIGN_OR_RETURN(iterator_, dataset_.MakeIterator(epoch));
  return OkStatus();
}

StatusOr<std::optional<PerReplica<ReplicaBatch>>> DistributedDataset::Next() {
  if (iterator_ == nullptr) TOWER_RETURN_IF_ERROR(Begin(0));
  TOWER_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, iterator_->Next());
  if (!batch.has_value()) return std::optional<PerReplica<ReplicaBatch>>();
  std::vector<ReplicaBatch> shards;
  const MirroredExtended& extended = strategy_->extended();
  for (int r = 0; r < extended.num_local_replicas(); ++r) {
    Device* device = extended.replica_device(r);
    ReplicaBatch shard;
    shard.rows = extended.ShardRows(batch->rows, extended.first_global_replica() + r);
    shard.global_batch_size = batch->rows;
    TOWER_ASSIGN_OR_RETURN(
        shard.features,
        Tensor::FromHostBytes(device, Shape{shard.rows.count, batch->feature_dim},
                              DType::kFloat32,
                              batch->features.data() + shard.rows.first * batch->feature_dim));
    TOWER_ASSIGN_OR_RETURN(
        shard.targets,
        Tensor::FromHostBytes(device, Shape{shard.rows.count, batch->target_dim},
                              DType::kFloat32,
                              batch->targets.data() + shard.rows.first * batch->target_dim));
    shards.push_back(std::move(shard));
  }
  return std::optional<PerReplica<ReplicaBatch>>(PerReplica<ReplicaBatch>(std::move(shards)));
}

StatusOr<std::unique_ptr<MirroredStrategy>> OneDeviceStrategy::Create(const std::string& device,
                                                                       Context* context) {
  MirroredStrategyOptions options;
  options.devices = {device};
  options.context = context;
  TOWER_ASSIGN_OR_RETURN(MirroredExtended::LocalSetup setup,
                         MirroredExtended::PrepareLocal("OneDeviceStrategy", options));
  TOWER_ASSIGN_OR_RETURN(
      std::unique_ptr<MirroredExtended> extended,
      MirroredExtended::Assemble("OneDeviceStrategy", LocalWorld::Get(), std::move(setup)));
  return std::make_unique<MirroredStrategy>(std::move(extended));
}

}  // namespace tower
