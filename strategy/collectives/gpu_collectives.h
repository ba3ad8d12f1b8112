// The GPU all-reduce paths, built only with --config=cuda (strategy/collectives/cuda/); without
// CUDA
// the stub says how to get them. No #ifdef: the BUILD file picks the implementation.
#ifndef TOWER_STRATEGY_COLLECTIVES_GPU_COLLECTIVES_H_
#define TOWER_STRATEGY_COLLECTIVES_GPU_COLLECTIVES_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "device/device.h"
#include "strategy/collectives/cross_device_ops.h"
#include "util/statusor.h"

namespace tower {

// Whether this binary has nccl and same-card.
bool GpuCollectivesBuilt();

// NCCL across GPUs on distinct cards: one communicator per device (ncclCommInitAll, once),
// an all-reduce per call on each device's stream.
StatusOr<std::unique_ptr<CrossDeviceOps>> MakeNcclAllReduce(
    const std::vector<Device*>& devices, const std::vector<std::string>& replica_names,
    std::chrono::milliseconds timeout);

// NCCL over the GPUs of several processes (MultiWorkerMirroredStrategy): one communicator of
// `world_ranks` GPUs, this process's `devices` being ranks first_rank, first_rank + 1, ...
// (ncclCommInitRank). `unique_id` is NewNcclUniqueId() of one process, sent to the others
// over MPI. A peer process can die mid-collective, so each collective completes on the host
// before returning, under `timeout`: on expiry (or an asynchronous NCCL error) the
// communicator is aborted and the error says which collective stalled.
StatusOr<std::string> NewNcclUniqueId();
StatusOr<std::unique_ptr<CrossDeviceOps>> MakeNcclAllReduceAcrossProcesses(
    const std::vector<Device*>& devices, const std::vector<std::string>& replica_names,
    std::chrono::milliseconds timeout, const std::string& unique_id, int first_rank,
    int world_ranks);

// Logical GPUs sharing one card: a kernel reads every replica's buffer and writes the sum to
// all of them, ordered with events against every replica's stream.
StatusOr<std::unique_ptr<CrossDeviceOps>> MakeSameCardAllReduce(
    const std::vector<Device*>& devices, const std::vector<std::string>& replica_names,
    std::chrono::milliseconds timeout, bool spin);

}  // namespace tower

#endif  // TOWER_STRATEGY_COLLECTIVES_GPU_COLLECTIVES_H_
