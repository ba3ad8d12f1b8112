#include "device/device_flags.h"

#include <algorithm>
#include <utility>

#include "util/strings.h"

namespace tower {
namespace {

constexpr int64_t kMaxLogicalPerPhysical = 64;
constexpr int64_t kMaxLogicalCpus = 256;
// Far above any machine's cores: the bound only keeps the value an int and the pool sane.
constexpr int64_t kMaxThreads = 1024;

StatusOr<std::vector<PhysicalDevice>> ParseVisibleGpus(const std::string& text,
                                                       const std::vector<PhysicalDevice>& gpus) {
  if (text == "all") return gpus;
  if (text.empty() || text == "none") return std::vector<PhysicalDevice>();
  std::vector<PhysicalDevice> visible;
  std::vector<int64_t> seen;
  for (const std::string& part : Split(text, ',')) {
    std::optional<int64_t> index = ParseInt64(part);
    if (!index || *index < 0) {
      return InvalidArgumentError("--visible-gpus='" + text + "': '" + part +
                                  "' is not a GPU index (use e.g. 0,1, or none)");
    }
    if (*index >= static_cast<int64_t>(gpus.size())) {
      return InvalidArgumentError("--visible-gpus='" + text + "': there is no GPU " + part +
                                  "; this machine has " + std::to_string(gpus.size()) +
                                  " GPU(s) (see `tower devices`)");
    }
    if (std::find(seen.begin(), seen.end(), *index) != seen.end()) {
      return InvalidArgumentError("--visible-gpus='" + text + "' lists GPU " + part + " twice");
    }
    seen.push_back(*index);
    visible.push_back(gpus[*index]);
  }
  return visible;
}

}  // namespace

void AddDeviceFlags(FlagParser* parser, DeviceFlags* flags) {
  parser->AddString("visible-gpus", &flags->visible_gpus,
                    "GPUs this process may use: all, none, or indices such as 0,1");
  parser->AddInt("virtual-gpus", &flags->virtual_gpus,
                 "split each visible GPU into this many logical GPUs (0 = one per card)");
  parser->AddInt("memory-limit", &flags->memory_limit_mb,
                 "memory limit of each logical GPU in MiB (0 = none)");
  parser->AddString("memory-growth", &flags->memory_growth,
                    "true: take GPU memory on demand (default); false: take it at start");
  parser->AddDouble("memory-fraction", &flags->memory_fraction,
                    "cap GPUs without a limit at this fraction of their memory (0 = unset)");
  parser->AddInt("virtual-cpus", &flags->virtual_cpus,
                 "split the CPU into this many logical CPUs (0 = one)");
  parser->AddInt("cpu-memory-limit", &flags->cpu_memory_limit_mb,
                 "memory limit of each logical CPU in MiB (0 = none)");
  parser->AddInt("intra-op-threads", &flags->intra_op_threads,
                 "at most this many threads per CPU kernel call (0 = one per core)");
  parser->AddInt("inter-op-threads", &flags->inter_op_threads,
                 "OS threads that run CPU replicas concurrently (0 = one per core)");
}

Status ApplyDeviceFlags(const DeviceFlags& flags, Context& context) {
  if (flags.virtual_gpus < 0 || flags.virtual_gpus > kMaxLogicalPerPhysical) {
    return InvalidArgumentError("--virtual-gpus=" + std::to_string(flags.virtual_gpus) +
                                " must be between 0 and " +
                                std::to_string(kMaxLogicalPerPhysical));
  }
  if (flags.virtual_cpus < 0 || flags.virtual_cpus > kMaxLogicalCpus) {
    return InvalidArgumentError("--virtual-cpus=" + std::to_string(flags.virtual_cpus) +
                                " must be between 0 and " + std::to_string(kMaxLogicalCpus));
  }
  if (flags.memory_limit_mb < 0) {
    return InvalidArgumentError("--memory-limit=" + std::to_string(flags.memory_limit_mb) +
                                " must be a positive number of MiB (or 0 for none)");
  }
  if (flags.cpu_memory_limit_mb < 0) {
    return InvalidArgumentError("--cpu-memory-limit=" +
                                std::to_string(flags.cpu_memory_limit_mb) +
                                " must be a positive number of MiB (or 0 for none)");
  }
  for (const auto& [name, value] : {std::pair<const char*, int64_t>{"intra-op-threads",
                                                                      flags.intra_op_threads},
                                     {"inter-op-threads", flags.inter_op_threads}}) {
    if (value < 0 || value > kMaxThreads) {
      return InvalidArgumentError(std::string("--") + name + "=" + std::to_string(value) +
                                  " must be between 0 (one per core) and " +
                                  std::to_string(kMaxThreads));
    }
  }
  if (!flags.memory_growth.empty() && flags.memory_growth != "true" &&
      flags.memory_growth != "false") {
    return InvalidArgumentError("--memory-growth='" + flags.memory_growth +
                                "' must be true or false");
  }

  // 0 leaves the setting as it is (the default, or what the program set itself).
  if (flags.intra_op_threads != 0) {
    TOWER_RETURN_IF_ERROR(
        context.SetIntraOpParallelismThreads(static_cast<int>(flags.intra_op_threads))
            .WithContext("--intra-op-threads"));
  }
  if (flags.inter_op_threads != 0) {
    TOWER_RETURN_IF_ERROR(
        context.SetInterOpParallelismThreads(static_cast<int>(flags.inter_op_threads))
            .WithContext("--inter-op-threads"));
  }

  const std::vector<PhysicalDevice> gpus = context.ListPhysicalDevices("GPU");
  TOWER_ASSIGN_OR_RETURN(std::vector<PhysicalDevice> visible,
                         ParseVisibleGpus(flags.visible_gpus, gpus));
  if (flags.visible_gpus != "all") {
    TOWER_RETURN_IF_ERROR(context.SetVisibleDevices(visible, "GPU"));
  }
  if (flags.memory_fraction != 0) {
    TOWER_RETURN_IF_ERROR(context.SetPerProcessMemoryFraction(flags.memory_fraction)
                              .WithContext("--memory-fraction"));
  }
  for (const PhysicalDevice& gpu : visible) {
    if (!flags.memory_growth.empty()) {
      TOWER_RETURN_IF_ERROR(context.SetMemoryGrowth(gpu, flags.memory_growth == "true"));
    }
    if (flags.virtual_gpus > 0 || flags.memory_limit_mb > 0) {
      LogicalDeviceConfiguration config;
      if (flags.memory_limit_mb > 0) config.memory_limit_mb = flags.memory_limit_mb;
      std::vector<LogicalDeviceConfiguration> configs(std::max<int64_t>(flags.virtual_gpus, 1),
                                                      config);
      TOWER_RETURN_IF_ERROR(context.SetLogicalDeviceConfiguration(gpu, configs)
                                .WithContext("--virtual-gpus/--memory-limit"));
    }
  }
  if (flags.virtual_cpus > 0 || flags.cpu_memory_limit_mb > 0) {
    LogicalDeviceConfiguration config;
    if (flags.cpu_memory_limit_mb > 0) config.memory_limit_mb = flags.cpu_memory_limit_mb;
    std::vector<LogicalDeviceConfiguration> configs(std::max<int64_t>(flags.virtual_cpus, 1),
                                                    config);
    TOWER_RETURN_IF_ERROR(
        context.SetLogicalDeviceConfiguration(context.ListPhysicalDevices("CPU")[0], configs)
            .WithContext("--virtual-cpus/--cpu-memory-limit"));
  }
  return OkStatus();
}

}  // namespace tower
