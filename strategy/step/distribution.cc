#include "strategy/step/distribution.h"

#include <algorithm>

#include "strategy/step/pass_accumulator.h"
#include "util/fiber.h"
#include "util/round_robin.h"
#include "util/trace.h"

namespace tower {
namespace {

// Per thread, and per replica fiber when replicas share a thread (util/fiber.h).
Distribution*& CurrentDistributionSlot() {
  static FiberLocal<Distribution*> slot;
  return slot.Get();
}

// One replica alone: nothing to sum across replicas; several passes (gradient
// accumulation) are summed locally.
class NoGradientReduction : public GradientReducer {
 public:
  Status Begin(Span<const int64_t>, int pass, int passes) override {
    added_ = 0;
    return passes_.Begin(pass, passes);
  }
  Status Add(Tensor* gradient) override { return passes_.Add(added_++, gradient); }
  Status Finish(Span<Tensor* const> extra) override { return passes_.AddExtras(extra); }

 private:
  PassAccumulator passes_;
  size_t added_ = 0;
};

class SingleReplicaContext : public ReplicaContext {
 public:
  explicit SingleReplicaContext(Device* device) : device_(device) {}
  int replica_id() const override { return 0; }
  int num_replicas_in_sync() const override { return 1; }
  int global_replica_id() const override { return 0; }
  Device* device() const override { return device_; }
  Status AllReduceSum(Span<Tensor* const>) override { return OkStatus(); }
  Status Broadcast(Span<Tensor* const>) override { return OkStatus(); }
  GradientReducer& gradient_reducer() override { return reducer_; }

 private:
  Device* device_;
  NoGradientReduction reducer_;
};

}  // namespace

RowRange ReplicaRows(int64_t global_rows, int num_replicas, int replica) {
  const int64_t base = global_rows / num_replicas;
  const int64_t extra = global_rows % num_replicas;
  RowRange range;
  range.first = replica * base + std::min<int64_t>(replica, extra);
  range.count = base + (replica < extra ? 1 : 0);
  return range;
}

void Distribution::PassRows(int64_t global_rows, int replica, int micro_batches,
                            std::vector<RowRange>* passes) const {
  passes->clear();
  const int shards = virtual_shards();
  if (shards <= 0) {
    const RowRange shard = ReplicaRows(global_rows, num_replicas_in_sync(), replica);
    for (int m = 0; m < std::max(micro_batches, 1); ++m) {
      const RowRange micro = ReplicaRows(shard.count, std::max(micro_batches, 1), m);
      passes->push_back(RowRange{shard.first + micro.first, micro.count});
    }
    return;
  }
  const RowRange mine = ReplicaRows(shards, num_replicas_in_sync(), replica);
  for (int64_t v = mine.first; v < mine.end(); ++v) {
    passes->push_back(ReplicaRows(global_rows, shards, static_cast<int>(v)));
  }
}

RowRange Distribution::ShardRows(int64_t global_rows, int replica) const {
  std::vector<RowRange> passes;
  PassRows(global_rows, replica, /*micro_batches=*/1, &passes);
  if (passes.empty()) return {0, 0};
  return {passes.front().first, passes.back().end() - passes.front().first};
}

StatusOr<std::vector<Tensor>> Distribution::MakeCopies(
    const std::function<StatusOr<Tensor>(Device*)>& make,
    const std::function<std::vector<Tensor>(const Tensor&, int)>& share) const {
  std::vector<Tensor> copies;
  // Shared: one copy, on replica 0's device.
  const bool shared = ReplicasShareVariables();
  for (int r = 0; r < (shared ? 1 : num_local_replicas()); ++r) {
    TOWER_ASSIGN_OR_RETURN(Tensor value, make(replica_device(r)));
    copies.push_back(std::move(value));
  }
  if (shared) copies = share(copies.front(), num_local_replicas());
  return copies;
}

Status Distribution::BroadcastCopies(const std::function<std::vector<Tensor*>(int)>& copies) {
  if (num_replicas_in_sync() == 1 || ReplicasShareVariables()) return OkStatus();
  return RunOnReplicas([&](ReplicaContext& ctx) -> Status {
    const std::vector<Tensor*> values = copies(ctx.replica_id());
    return ctx.Broadcast(values);
  });
}

Status Distribution::SynchronizeDevices() const {
  for (int r = 0; r < num_local_replicas(); ++r) {
    TOWER_RETURN_IF_ERROR(replica_device(r)->stream().Synchronize());
  }
  return OkStatus();
}

int Distribution::FirstReplicaNotOnCpu() const {
  for (int r = 0; r < num_local_replicas(); ++r) {
    if (!replica_device(r)->is_cpu()) return r;
  }
  return -1;
}

void Distribution::BatchShards(int64_t global_rows, int batch,
                               std::vector<RowRange>* shards) const {
  shards->clear();
  // Without batches, a replica is a batch of one.
  const int batches = batched_groups() > 0 ? batched_groups() : num_local_replicas();
  RoundRobin(num_local_replicas(), batches).ForEachOf(batch, [&](int member) {
    shards->push_back(
        ReplicaRows(global_rows, num_replicas_in_sync(), first_global_replica() + member));
  });
}

std::string Distribution::DescribeBatch(int local_replicas, int batches, int batch) {
  std::string members;
  RoundRobin(local_replicas, batches).ForEachOf(batch, [&](int member) {
    members += (members.empty() ? "" : ", ") + std::to_string(member);
  });
  return "computing the batch of replicas " + members;
}

std::string SingleDeviceDistribution::Describe() const {
  return "OneDevice(" + device_->full_name() + ")";
}

Status SingleDeviceDistribution::RunOnReplicas(
    const std::function<Status(ReplicaContext&)>& fn) {
  SingleReplicaContext context(device_);
  trace::LaneScope lane(0);
  return fn(context);
}

DistributionScope::DistributionScope(Distribution& distribution)
    : previous_(CurrentDistributionSlot()) {
  CurrentDistributionSlot() = &distribution;
}

DistributionScope::~DistributionScope() { CurrentDistributionSlot() = previous_; }

Distribution* CurrentDistribution() { return CurrentDistributionSlot(); }

}  // namespace tower
