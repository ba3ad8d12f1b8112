#include "device/device.h"

#include <mutex>
#include <utility>
#include <vector>

namespace tower {

int DeviceKindId(std::string_view device_type, std::string_view platform) {
  // A handful of pairs per process (CPU/Host, GPU/CUDA, a test's fake platform): a list.
  static std::mutex mu;
  static std::vector<std::pair<std::string, std::string>>* kinds =
      new std::vector<std::pair<std::string, std::string>>();  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  for (size_t i = 0; i < kinds->size(); ++i) {
    if ((*kinds)[i].first == device_type && (*kinds)[i].second == platform) {
      return static_cast<int>(i);
    }
  }
  kinds->emplace_back(std::string(device_type), std::string(platform));
  return static_cast<int>(kinds->size() - 1);
}

Device::Device(Context* context, DeviceName name, PhysicalDeviceInfo physical,
               Platform* platform, std::unique_ptr<BfcAllocator> allocator,
               std::unique_ptr<DeviceStream> stream)
    : context_(context),
      name_(std::move(name)),
      full_name_(name_.ToString()),
      physical_(std::move(physical)),
      platform_(platform),
      platform_name_(platform->name()),
      kind_(DeviceKindId(device_type(), platform_name_)),
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
