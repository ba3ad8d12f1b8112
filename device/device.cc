#include "device/device.h"

#include <utility>

namespace tower {

Device::Device(Context* context, DeviceName name, PhysicalDeviceInfo physical,
               Platform* platform, std::unique_ptr<BfcAllocator> allocator,
               std::unique_ptr<DeviceStream> stream)
    : context_(context),
      name_(std::move(name)),
      full_name_(name_.ToString()),
      physical_(std::move(physical)),
      platform_(platform),
      platform_name_(platform->name()),
      allocator_(std::move(allocator)),
      stream_(std::move(stream)) {
  TOWER_CHECK(name_.is_full()) << "logical device needs a full name: " << full_name_;
}

std::string Device::short_name() const { return device_type() + ":" + std::to_string(id()); }

bool Device::is_cpu() const { return device_type() == kDeviceTypeCpu; }
bool Device::is_gpu() const { return device_type() == kDeviceTypeGpu; }

StatusOr<Device::Resource*> Device::GetOrCreateResource(
    std::string_view key, const std::function<StatusOr<std::unique_ptr<Resource>>()>& make) {
  std::lock_guard<std::mutex> lock(resources_mu_);
  auto it = resources_.find(key);
  if (it != resources_.end()) return it->second.get();
  TOWER_ASSIGN_OR_RETURN(std::unique_ptr<Resource> made, make());
  Resource* resource = made.get();
  resources_.emplace(std::string(key), std::move(made));
  return resource;
}

bool Device::SharesPhysicalDeviceWith(const Device& other) const {
  if (device_type() != other.device_type()) return false;
  if (!physical_.uuid.empty() || !other.physical_.uuid.empty()) {
    return physical_.uuid == other.physical_.uuid;
  }
  return physical_.index == other.physical_.index;
}

}  // namespace tower
