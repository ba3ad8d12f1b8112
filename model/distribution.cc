#include "model/distribution.h"


namespace tower {
namespace {

thread_local Distribution* current_distribution = nullptr;

class SingleReplicaContext : public ReplicaContext {
 public:
  explicit SingleReplicaContext(Device* device) : device_(device) {}
  int replica_id() const override { return 0; }
  int num_replicas_in_sync() const override { return 1; }
  int global_replica_id() const override { return 0; }
  Device* device() const override { return device_; }
  Status AllReduceSum(Span<Tensor* const>) override { return OkStatus(); }
  Status Broadcast(Span<Tensor* const>) override { return OkStatus(); }

 private:
  Device* device_;
};

}  // namespace

std::string SingleDeviceDistribution::Describe() const {
  return "OneDevice(" + device_->full_name() + ")";
}

Status SingleDeviceDistribution::RunOnReplicas(
    const std::function<Status(ReplicaContext&)>& fn) {
  SingleReplicaContext context(device_);
  return fn(context);
}

DistributionScope::DistributionScope(Distribution& distribution)
    : previous_(current_distribution) {
  current_distribution = &distribution;
}

DistributionScope::~DistributionScope() { current_distribution = previous_; }

Distribution* CurrentDistribution() { return current_distribution; }

}  // namespace tower
