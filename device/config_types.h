// The values tower::config deals in, named and printed as TensorFlow's are.
#ifndef TOWER_DEVICE_CONFIG_TYPES_H_
#define TOWER_DEVICE_CONFIG_TYPES_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace tower {

// A physical device as tower::config lists it.
struct PhysicalDevice {
  std::string name;         // "/physical_device:GPU:0"
  std::string device_type;  // "GPU"

  // "PhysicalDevice(name='/physical_device:GPU:0', device_type='GPU')"
  std::string ToString() const;
  friend bool operator==(const PhysicalDevice& a, const PhysicalDevice& b) {
    return a.name == b.name && a.device_type == b.device_type;
  }
  friend bool operator!=(const PhysicalDevice& a, const PhysicalDevice& b) { return !(a == b); }
};

// A logical device: what ops and replicas run on.
struct LogicalDevice {
  std::string name;         // "/job:localhost/replica:0/task:0/device:GPU:0"
  std::string device_type;  // "GPU"

  // "LogicalDevice(name='/job:localhost/replica:0/task:0/device:GPU:0', device_type='GPU')"
  std::string ToString() const;
  friend bool operator==(const LogicalDevice& a, const LogicalDevice& b) {
    return a.name == b.name && a.device_type == b.device_type;
  }
};

// One logical device to carve out of a physical one (TensorFlow's LogicalDeviceConfiguration).
struct LogicalDeviceConfiguration {
  // Hard cap on the logical device's memory, in MiB. Unset: a GPU may use its card's memory
  // (or the per-process fraction of it); a CPU device has no cap.
  std::optional<int64_t> memory_limit_mb;

  friend bool operator==(const LogicalDeviceConfiguration& a,
                         const LogicalDeviceConfiguration& b) {
    return a.memory_limit_mb == b.memory_limit_mb;
  }
};

std::ostream& operator<<(std::ostream& os, const PhysicalDevice& device);
std::ostream& operator<<(std::ostream& os, const LogicalDevice& device);

}  // namespace tower

#endif  // TOWER_DEVICE_CONFIG_TYPES_H_
