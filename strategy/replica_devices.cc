#include "strategy/replica_devices.h"

#include <algorithm>

namespace tower {

StatusOr<std::vector<std::string>> ConfigureReplicaDevices(const ReplicaDeviceRequest& request,
                                                           Context& context) {
  const int64_t replicas = request.replicas;
  if (replicas < 1 || replicas > kMaxReplicasPerProcess) {
    return InvalidArgumentError("the replicas of one process must number between 1 and " +
                                std::to_string(kMaxReplicasPerProcess) + ", not " +
                                std::to_string(replicas));
  }
  std::vector<std::string> names;
  const std::vector<PhysicalDevice> gpus = context.GetVisibleDevices("GPU");
  const int64_t logical_gpus =
      gpus.empty() ? 0
                   : static_cast<int64_t>(gpus.size()) * std::max<int64_t>(request.virtual_gpus, 1);
  if (replicas == 1) return names;
  if (logical_gpus >= replicas) {
    // Enough GPUs (or virtual GPUs the caller asked for).
  } else if (!gpus.empty() && request.virtual_gpus == 0) {
    LogicalDeviceConfiguration config;
    if (request.gpu_memory_limit_mb > 0) config.memory_limit_mb = request.gpu_memory_limit_mb;
    TOWER_RETURN_IF_ERROR(context.SetLogicalDeviceConfiguration(
        gpus[0], std::vector<LogicalDeviceConfiguration>(replicas, config)));
  } else if (gpus.empty()) {
    if (request.virtual_cpus != 0 && request.virtual_cpus < replicas) {
      return InvalidArgumentError(std::to_string(replicas) + " replicas need " +
                                  std::to_string(replicas) + " logical CPUs, but " +
                                  std::to_string(request.virtual_cpus) +
                                  " virtual CPUs were asked for");
    }
    if (request.virtual_cpus == 0) {
      LogicalDeviceConfiguration config;
      if (request.cpu_memory_limit_mb > 0) config.memory_limit_mb = request.cpu_memory_limit_mb;
      TOWER_RETURN_IF_ERROR(context.SetLogicalDeviceConfiguration(
          context.ListPhysicalDevices("CPU")[0],
          std::vector<LogicalDeviceConfiguration>(replicas, config)));
    }
  } else {
    return InvalidArgumentError(std::to_string(replicas) + " replicas need " +
                                std::to_string(replicas) + " logical GPUs; the configuration "
                                "makes " + std::to_string(logical_gpus));
  }
  const std::string type = gpus.empty() ? "CPU" : "GPU";
  for (int64_t r = 0; r < replicas; ++r) names.push_back("/" + type + ":" + std::to_string(r));
  return names;
}

StatusOr<std::vector<std::string>> ConfigureReplicaDevices(int64_t replicas,
                                                           const DeviceFlags& flags,
                                                           Context& context) {
  ReplicaDeviceRequest request;
  request.replicas = replicas;
  request.virtual_gpus = flags.virtual_gpus;
  request.virtual_cpus = flags.virtual_cpus;
  request.gpu_memory_limit_mb = flags.memory_limit_mb;
  request.cpu_memory_limit_mb = flags.cpu_memory_limit_mb;
  StatusOr<std::vector<std::string>> names = ConfigureReplicaDevices(request, context);
  if (!names.ok()) return names.status().WithContext("--replicas=" + std::to_string(replicas));
  return names;
}

}  // namespace tower
