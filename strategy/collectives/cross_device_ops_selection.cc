#include "strategy/collectives/cross_device_ops_selection.h"

#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "util/strings.h"

namespace tower {

StatusOr<CrossDeviceOpsKind> ParseCrossDeviceOps(std::string_view name) {
  if (name == "auto" || name.empty()) return CrossDeviceOpsKind::kAuto;
  if (name == "in-process") return CrossDeviceOpsKind::kInProcess;
  if (name == "nccl") return CrossDeviceOpsKind::kNccl;
  if (name == "same-card") return CrossDeviceOpsKind::kSameCard;
  if (name == "to-cpu") return CrossDeviceOpsKind::kToCpu;
  return InvalidArgumentError("unknown cross-device ops '" + std::string(name) +
                              "'; use auto, in-process, nccl, same-card or to-cpu");
}

std::string_view CrossDeviceOpsName(CrossDeviceOpsKind kind) {
  switch (kind) {
    case CrossDeviceOpsKind::kAuto: return "auto";
    case CrossDeviceOpsKind::kInProcess: return "in-process";
    case CrossDeviceOpsKind::kNccl: return "nccl";
    case CrossDeviceOpsKind::kSameCard: return "same-card";
    case CrossDeviceOpsKind::kToCpu: return "to-cpu";
  }
  return "?";
}

namespace {

struct Layout {
  bool all_host = true;
  bool all_gpu = true;
  bool any_gpu = false;
  std::map<std::string, std::vector<std::string>> by_card;  // uuid -> replica names
};

Layout Describe(const std::vector<ReplicaDeviceInfo>& devices) {
  Layout layout;
  for (const ReplicaDeviceInfo& d : devices) {
    layout.all_host = layout.all_host && d.host_memory;
    layout.all_gpu = layout.all_gpu && d.is_gpu;
    layout.any_gpu = layout.any_gpu || d.is_gpu;
    if (d.is_gpu) layout.by_card[d.card_uuid].push_back(d.name);
  }
  return layout;
}

// "GPU:0 and GPU:1 share card GPU-aaaa" for the first shared card, or "".
std::string SharedCard(const Layout& layout) {
  for (const auto& [uuid, names] : layout.by_card) {
    if (names.size() > 1) return Join(names, " and ") + " share card " + uuid;
  }
  return "";
}

}  // namespace

StatusOr<CrossDeviceOpsChoice> ChooseCrossDeviceOps(const std::vector<ReplicaDeviceInfo>& devices,
                                                    CrossDeviceOpsKind requested,
                                                    bool gpu_paths_built,
                                                    bool nccl_ranks_may_share_gpu) {
  if (devices.empty()) return InvalidArgumentError("a strategy needs at least one device");
  const Layout layout = Describe(devices);
  const std::string shared = SharedCard(layout);
  const bool one_card = layout.all_gpu && layout.by_card.size() == 1;
  const bool distinct_cards = layout.all_gpu && layout.by_card.size() == devices.size();
  const std::string n = std::to_string(devices.size());

  switch (requested) {
    case CrossDeviceOpsKind::kAuto:
      if (devices.size() == 1) {
        // Nothing to reduce: no NCCL communicator of one rank (setup cost and failure modes
        // for nothing), no kernel. The in-process path returns at once for one replica.
        return CrossDeviceOpsChoice{CrossDeviceOpsKind::kInProcess,
                                    "one replica: nothing to reduce between devices"};
      }
      if (layout.all_host) {
        return CrossDeviceOpsChoice{CrossDeviceOpsKind::kInProcess,
                                    n + " replicas in host memory: summed in place by the "
                                        "replica threads, no copies"};
      }
      if (distinct_cards && gpu_paths_built) {
        return CrossDeviceOpsChoice{CrossDeviceOpsKind::kNccl,
                                    n + " GPUs, each on its own card: NCCL"};
      }
      if (one_card && devices.size() > 1 && gpu_paths_built) {
        return CrossDeviceOpsChoice{
            CrossDeviceOpsKind::kSameCard,
            n + " logical GPUs share card " + layout.by_card.begin()->first +
                ": summed by one kernel on the card (NCCL refuses two ranks on one GPU)"};
      }
      if (layout.all_gpu && !gpu_paths_built) {
        return CrossDeviceOpsChoice{CrossDeviceOpsKind::kToCpu,
                                    "this build has no CUDA collectives: reduce on /CPU:0"};
      }
      if (layout.any_gpu && !layout.all_gpu) {
        return CrossDeviceOpsChoice{CrossDeviceOpsKind::kToCpu,
                                    "replicas mix CPUs and GPUs: reduce on /CPU:0, then "
                                    "broadcast"};
      }
      return CrossDeviceOpsChoice{
          CrossDeviceOpsKind::kToCpu,
          "some GPUs share a card (" + shared + ") and others do not: reduce on /CPU:0. For "
          "speed use one logical GPU per card (nccl) or all replicas on one card (same-card)"};
    case CrossDeviceOpsKind::kInProcess:
      if (!layout.all_host) {
        return InvalidArgumentError("cross-device ops in-process need every replica in host "
                                    "memory (logical CPUs); these replicas include GPUs: use "
                                    "auto");
      }
      return CrossDeviceOpsChoice{requested, "asked for"};
    case CrossDeviceOpsKind::kNccl:
      if (!gpu_paths_built) {
        return InvalidArgumentError("cross-device ops nccl: this build has no CUDA; rebuild "
                                    "with --config=cuda");
      }
      if (!layout.all_gpu) {
        return InvalidArgumentError("cross-device ops nccl need GPU replicas only; use to-cpu "
                                    "or auto");
      }
      if (!shared.empty()) {
        if (nccl_ranks_may_share_gpu) {
          return CrossDeviceOpsChoice{requested, std::string("asked for, with ") +
                                                     kNcclMultiRankGpuVariable + "=1: " + shared};
        }
        return InvalidArgumentError("cross-device ops nccl cannot be used: " + shared +
                                    ", and NCCL refuses two ranks on one GPU unless " +
                                    kNcclMultiRankGpuVariable +
                                    "=1. Use same-card (or auto) for virtual GPUs on one card");
      }
      return CrossDeviceOpsChoice{requested, "asked for"};
    case CrossDeviceOpsKind::kSameCard:
      if (!gpu_paths_built) {
        return InvalidArgumentError("cross-device ops same-card: this build has no CUDA; "
                                    "rebuild with --config=cuda");
      }
      if (!one_card) {
        return InvalidArgumentError("cross-device ops same-card need every replica on one "
                                    "GPU card; these replicas span " +
                                    std::to_string(layout.by_card.size()) +
                                    " cards or include CPUs: use nccl, to-cpu or auto");
      }
      return CrossDeviceOpsChoice{requested, "asked for"};
    case CrossDeviceOpsKind::kToCpu:
      return CrossDeviceOpsChoice{requested, "asked for"};
  }
  return InternalError("unhandled cross-device ops kind");
}

bool NcclRanksMayShareGpu() {
  const char* value = std::getenv(kNcclMultiRankGpuVariable);
  if (value == nullptr) return false;
  const std::optional<int64_t> parsed = ParseInt64(value);
  return parsed.has_value() && *parsed != 0;
}

}  // namespace tower
