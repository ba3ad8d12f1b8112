#include "device/platform.h"

#include "device/device_name.h"

namespace tower {

std::string PhysicalDeviceInfo::name() const {
  return DeviceName::Physical(device_type, index).ToString();
}

}  // namespace tower
