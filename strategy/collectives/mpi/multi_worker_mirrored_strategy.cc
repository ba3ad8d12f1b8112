#include "strategy/collectives/mpi/multi_worker_mirrored_strategy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "device/context.h"
#include "strategy/collectives/cross_device_ops_selection.h"
#include "strategy/collectives/gpu_collectives.h"
#include "strategy/collectives/mpi/cross_process_all_reduce.h"
#include "util/logging.h"
#include "util/strings.h"

namespace tower {
namespace {

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex += kDigits[c >> 4];
    hex += kDigits[c & 15];
  }
  return hex;
}

std::string Unhex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return bytes;
}

// GPUs on every worker, each on a card of its own across the whole job: one NCCL
// communicator over all of them carries the reduction (NCCL on GPUs), instead
// of local reduction + MPI on the host. Every worker makes the same collective calls and the
// same decision (from gathered facts), so none is left waiting. nullptr: use the host path.
StatusOr<std::unique_ptr<CrossDeviceOps>> NcclAcrossProcesses(
    MpiWorld* world, const std::vector<Device*>& devices, const std::vector<std::string>& names,
    const MirroredStrategyOptions& options) {
  const bool wanted = options.cross_device_ops == CrossDeviceOpsKind::kAuto ||
                      options.cross_device_ops == CrossDeviceOpsKind::kNccl;
  if (!GpuCollectivesBuilt() || !wanted) return std::unique_ptr<CrossDeviceOps>();
  std::vector<std::string> cards;
  bool all_gpus = true;
  for (Device* device : devices) {
    all_gpus = all_gpus && device->is_gpu();
    cards.push_back(device->physical().uuid);
  }
  // Each worker's cards, after whether its NCCL may put two ranks on one GPU ("1:" or "0:";
  // NCCL_MULTI_RANK_GPU_ENABLE, read by NCCL in every process): nccl asked for on shared
  // cards is taken only where every worker's NCCL allows it, so all decide alike.
  const std::string sharing = NcclRanksMayShareGpu() ? "1:" : "0:";
  TOWER_ASSIGN_OR_RETURN(std::vector<std::string> all,
                         world->AllGather(sharing + (all_gpus ? Join(cards, ",") : "cpu"),
                                          options.collective_timeout, "comparing GPUs for NCCL"));
  int lacking = -1;  // the first worker whose NCCL keeps ranks on separate GPUs
  for (int r = 0; r < world->size() && lacking < 0; ++r) {
    if (!StartsWith(all[r], "1:")) lacking = r;
  }
  const bool asked = options.cross_device_ops == CrossDeviceOpsKind::kNccl;
  std::vector<std::string> seen;
  std::string why_not;
  for (int r = 0; r < world->size() && why_not.empty(); ++r) {
    const std::string worker_cards = all[r].substr(2);
    if (worker_cards == "cpu") {
      why_not = world->Describe(r) + " has replicas that are not GPUs";
      break;
    }
    for (const std::string& card : Split(worker_cards, ',')) {
      const bool again = std::find(seen.begin(), seen.end(), card) != seen.end();
      if (again && !(asked && lacking < 0)) {
        why_not = "card " + card + " holds two replicas (" + world->Describe(r) + ")";
        if (asked) {
          why_not += "; NCCL refuses two ranks on one GPU unless every worker sets " +
                     std::string(kNcclMultiRankGpuVariable) + "=1, and " +
                     world->Describe(lacking) + " does not";
        }
        break;
      }
      seen.push_back(card);
    }
  }
  if (!why_not.empty()) {
    if (options.cross_device_ops == CrossDeviceOpsKind::kNccl) {
      return InvalidArgumentError("cross-device ops nccl across processes: " + why_not);
    }
    TOWER_LOG(INFO) << "Across processes: MPI on the host (not NCCL: " << why_not << ")";
    return std::unique_ptr<CrossDeviceOps>();
  }
  // Rank 0 makes the communicator's id and everyone gets it (or rank 0's error).
  std::string mine;
  if (world->rank() == 0) {
    StatusOr<std::string> id = NewNcclUniqueId();
    mine = id.ok() ? Hex(*id) : "error: " + id.status().message();
  }
  TOWER_ASSIGN_OR_RETURN(std::vector<std::string> ids,
                         world->AllGather(mine, options.collective_timeout,
                                          "sharing the NCCL unique id"));
  if (StartsWith(ids[0], "error: ")) {
    return InternalError(world->Describe(0) + " could not make the NCCL id: " + ids[0].substr(7));
  }
  const int local = static_cast<int>(devices.size());
  TOWER_LOG(INFO) << "Across processes: one NCCL communicator over " << world->size() * local
                  << " GPUs";
  StatusOr<std::unique_ptr<CrossDeviceOps>> made = MakeNcclAllReduceAcrossProcesses(
      devices, names, options.collective_timeout, Unhex(ids[0]), world->rank() * local,
      world->size() * local);
  if (made.ok()) return made;
  // NCCL cannot say which worker is missing; the workers can: one more round over MPI, in
  // which a dead or stalled worker is named when the deadline expires.
  StatusOr<std::vector<std::string>> alive = world->AllGather(
      "no NCCL", options.collective_timeout, "reporting a failed NCCL setup");
  if (alive.ok()) return made.status();
  return Status(made.status().code(),
                made.status().message() + "; " + alive.status().message());
}

// Compares the workers' wall clocks (MirroredStrategyOptions::max_clock_skew). A first
// exchange lines the workers up (it ends for all within a message latency), then each reads
// its clock and the readings are gathered: the error is far below the 2 s worth reporting.
Status CompareClocks(MpiWorld* world, const MirroredStrategyOptions& options) {
  constexpr double kWorthSayingS = 2.0;
  if (world->size() == 1) return OkStatus();
  TOWER_RETURN_IF_ERROR(
      world->AllGather("", options.collective_timeout, "lining up to compare clocks").status());
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const int64_t mine = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
  TOWER_ASSIGN_OR_RETURN(std::vector<std::string> all,
                         world->AllGather(std::to_string(mine), options.collective_timeout,
                                          "comparing clocks"));
  int worst = 0;
  double worst_s = 0;
  const std::optional<int64_t> first = ParseInt64(all[0]);
  for (int r = 1; r < world->size() && first.has_value(); ++r) {
    const std::optional<int64_t> theirs = ParseInt64(all[r]);
    if (!theirs.has_value()) continue;
    const double skew_s = static_cast<double>(*theirs - *first) / 1e6;
    if (std::abs(skew_s) > std::abs(worst_s)) {
      worst = r;
      worst_s = skew_s;
    }
  }
  if (std::abs(worst_s) <= kWorthSayingS) return OkStatus();
  char amount[64];
  std::snprintf(amount, sizeof(amount), "%.1f s %s", std::abs(worst_s),
                worst_s > 0 ? "ahead of" : "behind");
  const std::string skew = "the clock of " + world->Describe(worst) + " is " + amount + " " +
                           world->Describe(0) + "'s";
  const double limit_s = static_cast<double>(options.max_clock_skew.count()) / 1000.0;
  if (options.max_clock_skew.count() > 0 && std::abs(worst_s) > limit_s) {
    char limit[32];
    std::snprintf(limit, sizeof(limit), "%g", limit_s);
    return InvalidArgumentError("workers disagree before the first step: " + skew +
                                ", more than the " + limit + " s allowed (synchronise the "
                                "hosts' clocks, with NTP, or allow more skew)");
  }
  if (world->rank() == 0 || world->rank() == worst) {
    TOWER_LOG(WARNING) << skew << ": logs and file times from these hosts disagree (training "
                       << "is not affected: each worker times its own deadlines)";
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<MirroredStrategy>> MultiWorkerMirroredStrategy::Create(
    const MirroredStrategyOptions& options) {
  TOWER_ASSIGN_OR_RETURN(MpiWorld * world, MpiWorld::Get());
  Context& context = options.context != nullptr ? *options.context : Context::Default();
  if (world->size() > 1) {
    SetLogPrefix("[rank " + std::to_string(world->rank()) + "] ");
    // Devices are named for this worker: /job:worker/replica:0/task:<rank>/device:...
    const Status named = context.SetJobAndTask("worker", world->rank());
    if (!named.ok()) TOWER_LOG(WARNING) << named.message();
  }
  TOWER_ASSIGN_OR_RETURN(MirroredExtended::LocalSetup setup,
                         MirroredExtended::PrepareLocal("MultiWorkerMirroredStrategy", options));
  // Every worker needs the same number of local replicas (the global batch is split by the
  // global count): checked on every rank before anything else.
  TOWER_ASSIGN_OR_RETURN(std::vector<std::string> counts,
                         world->AllGather(std::to_string(setup.devices.size()),
                                          options.collective_timeout, "comparing replica counts"));
  for (int r = 0; r < world->size(); ++r) {
    if (counts[r] != counts[0]) {
      return InvalidArgumentError("workers disagree on local replicas: " + world->Describe(0) +
                                  " has " + counts[0] + ", " + world->Describe(r) + " has " +
                                  counts[r] + "; give every worker the same --replicas");
    }
  }
  TOWER_RETURN_IF_ERROR(CompareClocks(world, options));
  if (world->size() > 1) {
    TOWER_ASSIGN_OR_RETURN(std::unique_ptr<CrossDeviceOps> nccl,
                           NcclAcrossProcesses(world, setup.devices, setup.names, options));
    if (nccl != nullptr && options.cross_process_dtype != DType::kFloat32) {
      return InvalidArgumentError(
          "MultiWorkerMirroredStrategy: a " + std::string(DTypeName(options.cross_process_dtype)) +
          " all-reduce across workers is built for the MPI path, not NCCL; use float32");
    }
    if (nccl != nullptr) {
      setup.ops = std::move(nccl);
      setup.choice = {CrossDeviceOpsKind::kNccl,
                      "one NCCL communicator over every worker's GPUs (each on its own card)"};
    } else {
      setup.ops = std::make_unique<CrossProcessAllReduce>(
          std::move(setup.ops), world, setup.names, options.collective_timeout, setup.spin,
          options.cross_process_dtype);
    }
  }
  TOWER_ASSIGN_OR_RETURN(
      std::unique_ptr<MirroredExtended> extended,
      MirroredExtended::Assemble("MultiWorkerMirroredStrategy", world, std::move(setup)));
  TOWER_LOG(INFO) << "Worker " << world->Describe(world->rank()) << " of " << world->size() << ": "
                  << extended->num_replicas_in_sync() << " replicas in sync";
  return std::make_unique<MirroredStrategy>(std::move(extended));
}

}  // namespace tower
