#include "device/config.h"

namespace tower::config {

std::vector<PhysicalDevice> ListPhysicalDevices(std::string_view device_type) {
  return Context::Global().ListPhysicalDevices(device_type);
}

StatusOr<PhysicalDeviceInfo> GetDeviceDetails(const PhysicalDevice& device) {
  return Context::Global().GetDeviceDetails(device);
}

Status SetVisibleDevices(const std::vector<PhysicalDevice>& devices,
                         std::string_view device_type) {
  return Context::Global().SetVisibleDevices(devices, device_type);
}

std::vector<PhysicalDevice> GetVisibleDevices(std::string_view device_type) {
  return Context::Global().GetVisibleDevices(device_type);
}

Status SetMemoryGrowth(const PhysicalDevice& device, bool enable) {
  return Context::Global().SetMemoryGrowth(device, enable);
}

StatusOr<bool> GetMemoryGrowth(const PhysicalDevice& device) {
  return Context::Global().GetMemoryGrowth(device);
}

Status SetLogicalDeviceConfiguration(const PhysicalDevice& device,
                                     const std::vector<LogicalDeviceConfiguration>& configs) {
  return Context::Global().SetLogicalDeviceConfiguration(device, configs);
}

StatusOr<std::vector<LogicalDeviceConfiguration>> GetLogicalDeviceConfiguration(
    const PhysicalDevice& device) {
  return Context::Global().GetLogicalDeviceConfiguration(device);
}

Status SetPerProcessMemoryFraction(double fraction) {
  return Context::Global().SetPerProcessMemoryFraction(fraction);
}

std::optional<double> GetPerProcessMemoryFraction() {
  return Context::Global().GetPerProcessMemoryFraction();
}

void SetSoftDevicePlacement(bool enable) { Context::Global().SetSoftDevicePlacement(enable); }
bool GetSoftDevicePlacement() { return Context::Global().GetSoftDevicePlacement(); }
void SetLogDevicePlacement(bool enable) { Context::Global().SetLogDevicePlacement(enable); }
bool GetLogDevicePlacement() { return Context::Global().GetLogDevicePlacement(); }

Status SetIntraOpParallelismThreads(int num_threads) {
  return Context::Global().SetIntraOpParallelismThreads(num_threads);
}
int GetIntraOpParallelismThreads() { return Context::Global().GetIntraOpParallelismThreads(); }
Status SetInterOpParallelismThreads(int num_threads) {
  return Context::Global().SetInterOpParallelismThreads(num_threads);
}
int GetInterOpParallelismThreads() { return Context::Global().GetInterOpParallelismThreads(); }

StatusOr<std::vector<LogicalDevice>> ListLogicalDevices(std::string_view device_type) {
  return Context::Global().ListLogicalDevices(device_type);
}

StatusOr<AllocatorStats> GetMemoryInfo(std::string_view device) {
  return Context::Global().GetMemoryStats(device);
}

Status ResetMemoryStats(std::string_view device) {
  return Context::Global().ResetMemoryStats(device);
}

}  // namespace tower::config
