// The strategy for how this program was launched, for the CLI and the examples: under Open
// MPI's mpirun this process is one worker of a MultiWorkerMirroredStrategy (the options'
// devices are its local replicas); otherwise a MirroredStrategy over the options' devices.
//
//   auto strategy = tower::CreateStrategyFromEnvironment(options);
//   if (!strategy.ok()) { report; tower::AbortOtherWorkers(1); return 1; }
#ifndef TOWER_STRATEGY_STRATEGY_FROM_ENVIRONMENT_H_
#define TOWER_STRATEGY_STRATEGY_FROM_ENVIRONMENT_H_

#include <memory>

#include "strategy/mirrored_strategy.h"

namespace tower {

// Whether this process was started by mpirun (Open MPI's environment is present).
bool LaunchedByMpirun();

StatusOr<std::unique_ptr<MirroredStrategy>> CreateStrategyFromEnvironment(
    const MirroredStrategyOptions& options = MirroredStrategyOptions());

// After a failure before any strategy exists (a bad flag, a failed setup): one worker of
// several under mpirun ends the whole job at once, since the others may wait for it in a
// collective. Otherwise returns.
void AbortOtherWorkers(int exit_code);

}  // namespace tower

#endif  // TOWER_STRATEGY_STRATEGY_FROM_ENVIRONMENT_H_
