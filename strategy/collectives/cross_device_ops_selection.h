// Which all-reduce a strategy uses, chosen once from its devices (the table below):
//
//   replicas                                  path         why
//   one replica (any device)                  in-process   nothing to reduce: no communicator
//   all in host memory (logical CPUs)         in-process   one address space
//   GPUs, each on its own card                nccl         what NCCL is for
//   several logical GPUs, all on one card     same-card    NCCL refuses two ranks on one GPU
//   mixed CPU/GPU, GPUs partly sharing cards  to-cpu       the path that always works
//
// "Same card" is decided by the physical device's UUID, never by counting devices. A path
// asked for explicitly is checked: NCCL on shared-card replicas is InvalidArgument saying why
// and what to use instead, unless NCCL itself was told to let ranks share a GPU
// (NCCL_MULTI_RANK_GPU_ENABLE=1, NCCL's own switch): then nccl asked for is taken as asked
// (auto still picks same-card, the faster path on one card). That is how NCCL's code runs on
// a machine with one card.
#ifndef TOWER_STRATEGY_COLLECTIVES_CROSS_DEVICE_OPS_SELECTION_H_
#define TOWER_STRATEGY_COLLECTIVES_CROSS_DEVICE_OPS_SELECTION_H_

#include <string>
#include <string_view>
#include <vector>

#include "util/statusor.h"

namespace tower {

enum class CrossDeviceOpsKind { kAuto, kInProcess, kNccl, kSameCard, kToCpu };

// "auto", "in-process", "nccl", "same-card", "to-cpu".
StatusOr<CrossDeviceOpsKind> ParseCrossDeviceOps(std::string_view name);
std::string_view CrossDeviceOpsName(CrossDeviceOpsKind kind);

// What selection needs to know about a replica's device.
struct ReplicaDeviceInfo {
  std::string name;        // "/job:localhost/replica:0/task:0/device:GPU:1"
  bool is_gpu = false;
  bool host_memory = false;  // the CPU can read its tensors directly
  std::string card_uuid;     // GPUs: the physical card's UUID
};

struct CrossDeviceOpsChoice {
  CrossDeviceOpsKind kind;
  std::string reason;  // logged: "2 logical GPUs share card GPU-1a2b...: ..."
};

// `requested` kAuto picks by the table; anything else is validated. `gpu_paths_built`:
// whether this binary has the CUDA paths (nccl, same-card). `nccl_ranks_may_share_gpu`:
// NcclRanksMayShareGpu() where the strategy is made.
StatusOr<CrossDeviceOpsChoice> ChooseCrossDeviceOps(const std::vector<ReplicaDeviceInfo>& devices,
                                                    CrossDeviceOpsKind requested,
                                                    bool gpu_paths_built,
                                                    bool nccl_ranks_may_share_gpu);

// Whether this process's environment lets NCCL place two ranks on one GPU:
// NCCL_MULTI_RANK_GPU_ENABLE set to a non-zero integer, as NCCL reads it.
bool NcclRanksMayShareGpu();
// The variable's name, for messages.
inline constexpr char kNcclMultiRankGpuVariable[] = "NCCL_MULTI_RANK_GPU_ENABLE";

}  // namespace tower

#endif  // TOWER_STRATEGY_COLLECTIVES_CROSS_DEVICE_OPS_SELECTION_H_
