#include "strategy/strategy_from_environment.h"

#include "strategy/collectives/mpi/mpi_world.h"
#include "strategy/collectives/mpi/multi_worker_mirrored_strategy.h"

namespace tower {

bool LaunchedByMpirun() { return MpiWorld::LaunchedByMpirun(); }

StatusOr<std::unique_ptr<MirroredStrategy>> CreateStrategyFromEnvironment(
    const MirroredStrategyOptions& options) {
  if (LaunchedByMpirun()) return MultiWorkerMirroredStrategy::Create(options);
  return MirroredStrategy::Create(options);
}

void AbortOtherWorkers(int exit_code) {
  if (!LaunchedByMpirun()) return;
  StatusOr<MpiWorld*> world = MpiWorld::Get();
  if (world.ok() && (*world)->size() > 1) (*world)->AbortJob(exit_code);
}

}  // namespace tower
