// tower::config — TensorFlow's tf.config, in C++, on the process's global Context.
//
//   auto gpus = tower::config::ListPhysicalDevices("GPU");
//   for (const auto& gpu : gpus) TOWER_CHECK_OK(tower::config::SetMemoryGrowth(gpu, true));
//   // Two virtual GPUs of 1 GiB each on the first card:
//   TOWER_CHECK_OK(tower::config::SetLogicalDeviceConfiguration(
//       gpus[0], {tower::LogicalDeviceConfiguration{1024}, tower::LogicalDeviceConfiguration{1024}}));
//   auto logical = tower::config::ListLogicalDevices("GPU");  // initialises the runtime
//
// Semantics, memory policies and error texts are documented in device/context.h.
#ifndef TOWER_DEVICE_CONFIG_H_
#define TOWER_DEVICE_CONFIG_H_

#include <optional>
#include <string_view>
#include <vector>

#include "device/config_types.h"
#include "device/context.h"

namespace tower::config {

std::vector<PhysicalDevice> ListPhysicalDevices(std::string_view device_type = "");
StatusOr<PhysicalDeviceInfo> GetDeviceDetails(const PhysicalDevice& device);

Status SetVisibleDevices(const std::vector<PhysicalDevice>& devices,
                         std::string_view device_type = "");
std::vector<PhysicalDevice> GetVisibleDevices(std::string_view device_type = "");

Status SetMemoryGrowth(const PhysicalDevice& device, bool enable);
StatusOr<bool> GetMemoryGrowth(const PhysicalDevice& device);

Status SetLogicalDeviceConfiguration(const PhysicalDevice& device,
                                     const std::vector<LogicalDeviceConfiguration>& configs);
StatusOr<std::vector<LogicalDeviceConfiguration>> GetLogicalDeviceConfiguration(
    const PhysicalDevice& device);

Status SetPerProcessMemoryFraction(double fraction);
std::optional<double> GetPerProcessMemoryFraction();

void SetSoftDevicePlacement(bool enable);
bool GetSoftDevicePlacement();
void SetLogDevicePlacement(bool enable);
bool GetLogDevicePlacement();

// TensorFlow's tf.config.threading: 0 (the default) lets the system pick, one thread per
// usable core; negative counts are InvalidArgument; once the runtime is initialised a
// different value fails with "Intra op parallelism cannot be modified after
// initialization." (resp. "Inter op ..."), the same value succeeds.
// Intra-op: threads one CPU kernel call may use (a replica's share of them: see
// device/intra_op.h). Inter-op: OS threads that run CPU replicas concurrently.
Status SetIntraOpParallelismThreads(int num_threads);
int GetIntraOpParallelismThreads();
Status SetInterOpParallelismThreads(int num_threads);
int GetInterOpParallelismThreads();

// Initialises the runtime.
StatusOr<std::vector<LogicalDevice>> ListLogicalDevices(std::string_view device_type = "");

// TensorFlow's get_memory_info / reset_memory_stats, with the allocator's full statistics.
StatusOr<AllocatorStats> GetMemoryInfo(std::string_view device);
Status ResetMemoryStats(std::string_view device);

}  // namespace tower::config

#endif  // TOWER_DEVICE_CONFIG_H_
