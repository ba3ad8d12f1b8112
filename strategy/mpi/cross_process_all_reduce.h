// The all-reduce of MultiWorkerMirroredStrategy: first among this process's replicas (the
// in-process or same-card path), then across processes (MPI, by replica 0, all tensors in
// one message), then every local replica takes replica 0's result. Every phase has the
// strategy's deadline; a missing worker is named.
#ifndef TOWER_STRATEGY_MPI_CROSS_PROCESS_ALL_REDUCE_H_
#define TOWER_STRATEGY_MPI_CROSS_PROCESS_ALL_REDUCE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strategy/cross_device_ops.h"
#include "strategy/mpi/mpi_world.h"
#include "strategy/replica_barrier.h"

namespace tower {

class CrossProcessAllReduce : public CrossDeviceOps {
 public:
  CrossProcessAllReduce(std::unique_ptr<CrossDeviceOps> local, MpiWorld* world,
                        std::vector<std::string> replica_names,
                        std::chrono::milliseconds timeout, bool spin);
  std::string name() const override { return local_->name() + "+mpi"; }
  Status AllReduceSum(int replica, Span<Tensor* const> tensors) override;
  // Deterministic mode: replica 0 gathers this process's partial sums on the host and forms
  // the process's subtrees; the workers exchange them by element range (MPI all-to-all),
  // each evaluates the tree on its range, and an all-gather gives everyone every root.
  Status AllReduceTree(int replica, const PartialSums& mine, Span<Tensor* const> roots) override;
  Status Broadcast(int replica, Span<Tensor* const> tensors) override;
  Status FinishReductions(int replica) override { return local_->FinishReductions(replica); }
  void Abort(const Status& reason) override;
  void Reset() override;

 private:
  // Replica 0 runs `cross` (the MPI step); then every replica copies replica 0's tensors.
  // Each replica has published its `tensors` in published_ before calling (written once
  // per call: a second write would race with replica 0's reads in `cross`).
  Status CrossThenShare(int replica, Span<Tensor* const> tensors,
                        const std::function<Status()>& cross);

  const std::unique_ptr<CrossDeviceOps> local_;
  MpiWorld* const world_;
  const std::chrono::milliseconds timeout_;
  const std::vector<std::string> names_;
  ReplicaBarrier barrier_;
  std::vector<Span<Tensor* const>> published_;
  std::vector<float> staging_;  // replica 0's host copy of the tensors, end to end
  // AllReduceTree (replica 0's): every local replica's partial sums; host buffers.
  Status CrossTree(Span<Tensor* const> roots);
  std::vector<const PartialSums*> published_parts_;
  std::vector<float> local_nodes_;   // [local node][element]
  std::vector<float> cover_;         // [this process's subtree][element]
  std::vector<float> send_;          // [worker][subtree][its range]
  std::vector<float> received_;      // [worker][its subtree][my range]
  TreePlanCache cover_plan_;
  TreePlanCache root_plan_;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_MPI_CROSS_PROCESS_ALL_REDUCE_H_
