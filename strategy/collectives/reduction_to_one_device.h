// ReductionToOneDevice: TensorFlow's "Reduce to /CPU:0 then broadcast". Each replica copies
// its tensors to the reduce device, one replica sums them there (AddN, in replica order),
// and each replica copies the sum back. Works for any mix of devices; chosen for mixed
// CPU/GPU replicas, and when asked for.
#ifndef TOWER_STRATEGY_COLLECTIVES_REDUCTION_TO_ONE_DEVICE_H_
#define TOWER_STRATEGY_COLLECTIVES_REDUCTION_TO_ONE_DEVICE_H_

#include <string>
#include <vector>

#include "strategy/collectives/cross_device_ops.h"
#include "strategy/collectives/replica_barrier.h"

namespace tower {

class ReductionToOneDevice : public CrossDeviceOps {
 public:
  ReductionToOneDevice(Device* reduce_to, std::vector<std::string> replica_names,
                       std::chrono::milliseconds timeout, bool spin);
  std::string name() const override { return "to-cpu"; }
  Status Broadcast(int replica, Span<Tensor* const> tensors) override;
  void Abort(const Status& reason) override { barrier_.Abort(reason); }
  void Reset() override { barrier_.Reset(); }
  Device* reduce_device() const { return reduce_to_; }

 private:
  // The plain sum (Sum) or the tree sum (SumTree); no other option.
  Status RunAllReduce(int replica, Span<Tensor* const> tensors,
                      const AllReduceOptions& options) override;
  Status Sum(int replica, Span<Tensor* const> tensors);
  // Every replica's partial sums go to the reduce device, replica 0 evaluates the tree
  // there, and every replica copies the roots back.
  Status SumTree(int replica, const PartialSums& mine, Span<Tensor* const> roots);
  // Phase 1 of both collectives: publish, meet, check the lists agree.
  Status Publish(int replica, Span<Tensor* const> tensors);
  Status CheckAll() const;
  // Runs `step` (which may fail) and meets; a failure aborts the barrier for the others.
  Status Phase(int replica, const Status& step);

  Device* const reduce_to_;
  const std::vector<std::string> names_;
  ReplicaBarrier barrier_;
  std::vector<Span<Tensor* const>> published_;
  std::vector<std::vector<Tensor>> staged_;  // [replica][tensor], on reduce_to_
  std::vector<Tensor> results_;              // [tensor], on reduce_to_
  // SumTree: each replica's partial sums, and their copies [replica][node][tensor].
  std::vector<const PartialSums*> published_parts_;
  std::vector<std::vector<std::vector<Tensor>>> staged_nodes_;
  TreePlanCache plan_;  // used by replica 0
};

}  // namespace tower

#endif  // TOWER_STRATEGY_COLLECTIVES_REDUCTION_TO_ONE_DEVICE_H_
