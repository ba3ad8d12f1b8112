// Builds without CUDA: no GPU collectives (and no real GPUs to use them on).
#include "strategy/collectives/gpu_collectives.h"

namespace tower {
namespace {

Status NotBuilt(const char* path) {
  return UnimplementedError(std::string("cross-device ops ") + path +
                            " need a CUDA build: rebuild with --config=cuda");
}

}  // namespace

bool GpuCollectivesBuilt() { return false; }

StatusOr<std::unique_ptr<CrossDeviceOps>> MakeNcclAllReduce(const std::vector<Device*>&,
                                                            const std::vector<std::string>&,
                                                            std::chrono::milliseconds) {
  return NotBuilt("nccl");
}

StatusOr<std::string> NewNcclUniqueId() { return NotBuilt("nccl"); }

StatusOr<std::unique_ptr<CrossDeviceOps>> MakeNcclAllReduceAcrossProcesses(
    const std::vector<Device*>&, const std::vector<std::string>&, std::chrono::milliseconds,
    const std::string&, int, int) {
  return NotBuilt("nccl");
}

StatusOr<std::unique_ptr<CrossDeviceOps>> MakeSameCardAllReduce(const std::vector<Device*>&,
                                                                const std::vector<std::string>&,
                                                                std::chrono::milliseconds, bool) {
  return NotBuilt("same-card");
}

}  // namespace tower
