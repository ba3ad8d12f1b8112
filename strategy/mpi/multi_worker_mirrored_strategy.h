// MultiWorkerMirroredStrategy: MirroredStrategy across processes (and machines) launched by
// Open MPI's mpirun, with the same user code.
//
//   mpirun -np 2 bazel-bin/tools/tower train --data=synthetic:mlp --replicas=2 ...
//
// Each process runs its local replicas as MirroredStrategy does; the global replica count
// is processes × local replicas, and the dataset is sharded over all of them (every worker
// iterates the same global batches, each takes its replicas' shards). Gradients are summed
// locally, then across processes (MPI, every call with a deadline naming a missing worker),
// then shared locally. Variables start from rank 0's values; rank 0 writes checkpoints and
// logs; every log line starts with "[rank N] ". A worker with a different model or replica
// count is reported on every rank before the first step.
#ifndef TOWER_STRATEGY_MPI_MULTI_WORKER_MIRRORED_STRATEGY_H_
#define TOWER_STRATEGY_MPI_MULTI_WORKER_MIRRORED_STRATEGY_H_

#include <memory>

#include "strategy/mirrored_strategy.h"
#include "strategy/mpi/mpi_world.h"

namespace tower {

class MultiWorkerMirroredStrategy : public MirroredStrategy {
 public:
  static StatusOr<std::unique_ptr<MultiWorkerMirroredStrategy>> Create(
      const MirroredStrategyOptions& options = MirroredStrategyOptions());

  std::string Describe() const override;
  int num_replicas_in_sync() const override { return world_->size() * num_local_replicas(); }
  int first_global_replica() const override { return world_->rank() * num_local_replicas(); }
  bool is_chief() const override { return world_->rank() == 0; }
  Status CheckConsistent(const std::string& signature) override;

  MpiWorld& world() const { return *world_; }

 private:
  MultiWorkerMirroredStrategy(MpiWorld* world, LocalSetup setup, std::unique_ptr<CrossDeviceOps> ops,
                              std::chrono::milliseconds timeout);

  MpiWorld* const world_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_MPI_MULTI_WORKER_MIRRORED_STRATEGY_H_
