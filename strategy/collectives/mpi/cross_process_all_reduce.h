// The all-reduce of MultiWorkerMirroredStrategy: first among this process's replicas (the
// in-process or same-card path), then across processes (MPI, by replica 0, all tensors in
// one message), then every local replica takes replica 0's result. Every phase has the
// strategy's deadline; a missing worker is named.
//
// Reduced precision (a 16-bit `wire_dtype`): the cross-process step sends bfloat16 or
// float16 instead of float32 and sums in float32. Worker w owns the w-th contiguous range
// of the elements: an all-to-all gives it every worker's values of its range (16-bit), it
// sums them in float32 in rank order and rounds the sum once, and an all-gather gives every
// worker every range's sum (16-bit). Half the bytes of a float32 all-reduce; every worker
// ends with the same bits.
#ifndef TOWER_STRATEGY_COLLECTIVES_MPI_CROSS_PROCESS_ALL_REDUCE_H_
#define TOWER_STRATEGY_COLLECTIVES_MPI_CROSS_PROCESS_ALL_REDUCE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strategy/collectives/cross_device_ops.h"
#include "strategy/collectives/mpi/mpi_world.h"
#include "strategy/collectives/replica_barrier.h"

namespace tower {

class CrossProcessAllReduce : public CrossDeviceOps {
 public:
  CrossProcessAllReduce(std::unique_ptr<CrossDeviceOps> local, MpiWorld* world,
                        std::vector<std::string> replica_names,
                        std::chrono::milliseconds timeout, bool spin,
                        DType wire_dtype = DType::kFloat32);
  // Bytes this process has sent to the other workers in its sums: the 16-bit path counts
  // what its all-to-all and all-gather send to others (2·(W − 1)/W · 2 B per element); a
  // float32 all-reduce, inside MPI, counts what a ring all-reduce sends (2·(W − 1)/W · 4 B
  // per element; at 2 workers every algorithm sends that).
  int64_t bytes_sent_to_other_workers() const override { return bytes_sent_; }
  DType wire_dtype() const { return wire_dtype_; }
  std::string name() const override { return local_->name() + "+mpi"; }
  Status Broadcast(int replica, Span<Tensor* const> tensors) override;
  Status FinishReductions(int replica) override { return local_->FinishReductions(replica); }
  void Abort(const Status& reason) override;
  void Reset() override;

 private:
  // The plain sum (Sum) or the tree sum (SumTree); no other option.
  Status RunAllReduce(int replica, Span<Tensor* const> tensors,
                      const AllReduceOptions& options) override;
  // The local path's sum, then replica 0's across processes, then shared.
  Status Sum(int replica, Span<Tensor* const> tensors);
  // Deterministic mode: replica 0 gathers this process's partial sums on the host and forms
  // the process's subtrees; the workers exchange them by element range (MPI all-to-all),
  // each evaluates the tree on its range, and an all-gather gives everyone every root.
  Status SumTree(int replica, const PartialSums& mine, Span<Tensor* const> roots);
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
  // The tensors copied into staging_, end to end; their element count.
  StatusOr<int64_t> PackToStaging(Span<Tensor* const> tensors);
  // staging_ copied back into the tensors (the layout PackToStaging made).
  Status UnpackFromStaging(Span<Tensor* const> tensors);
  // The 16-bit cross-process step on staging_'s first `count` elements.
  Status SumAcrossWorkersIn16Bits(int64_t count, const std::string& what);
  const DType wire_dtype_;
  int64_t bytes_sent_ = 0;
  std::vector<uint16_t> wire_send_, wire_receive_, wire_sums_;
  // SumTree's step across processes (replica 0's): every local replica's partial sums; host
  // buffers.
  Status CrossTree(Span<Tensor* const> roots);
  // CrossTree's steps 1 and 2: every local partial sum on the host (local_nodes_), and from
  // them this process's largest subtrees `my_cover` (cover_, `elements` floats each).
  Status HostCovers(int leaves, const std::vector<TreeNode>& my_cover, int64_t elements);
  std::vector<const PartialSums*> published_parts_;
  std::vector<float> local_nodes_;   // [local node][element]
  std::vector<float> cover_;         // [this process's subtree][element]
  std::vector<float> send_;          // [worker][subtree][its range]
  std::vector<float> received_;      // [worker][its subtree][my range]
  TreePlanCache cover_plan_;
  TreePlanCache root_plan_;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_COLLECTIVES_MPI_CROSS_PROCESS_ALL_REDUCE_H_
