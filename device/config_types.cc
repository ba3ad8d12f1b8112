#include "device/config_types.h"

namespace tower {

std::string PhysicalDevice::ToString() const {
  return "PhysicalDevice(name='" + name + "', device_type='" + device_type + "')";
}

std::string LogicalDevice::ToString() const {
  return "LogicalDevice(name='" + name + "', device_type='" + device_type + "')";
}

std::ostream& operator<<(std::ostream& os, const PhysicalDevice& device) {
  return os << device.ToString();
}

std::ostream& operator<<(std::ostream& os, const LogicalDevice& device) {
  return os << device.ToString();
}

}  // namespace tower
