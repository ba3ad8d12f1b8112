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
#ifndef TOWER_STRATEGY_COLLECTIVES_MPI_MULTI_WORKER_MIRRORED_STRATEGY_H_
#define TOWER_STRATEGY_COLLECTIVES_MPI_MULTI_WORKER_MIRRORED_STRATEGY_H_

#include <memory>

#include "strategy/mirrored_strategy.h"
#include "strategy/collectives/mpi/mpi_world.h"

namespace tower {

// Not a subclass: a MirroredStrategy over the MPI world (strategy/runtime/world.h), so Run, Reduce,
// DistributeDataset and num_replicas_in_sync() are the ones of one process, right across
// workers by construction.
class MultiWorkerMirroredStrategy {
 public:
  // Starts MPI if needed; Unavailable when it cannot. One worker alone (mpirun -np 1) is a
  // MirroredStrategy over a world of one.
  static StatusOr<std::unique_ptr<MirroredStrategy>> Create(
      const MirroredStrategyOptions& options = MirroredStrategyOptions());
};

}  // namespace tower

#endif  // TOWER_STRATEGY_COLLECTIVES_MPI_MULTI_WORKER_MIRRORED_STRATEGY_H_
