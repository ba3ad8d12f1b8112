// The host CPU: one physical device, /physical_device:CPU:0, with host memory.
#ifndef TOWER_DEVICE_CPU_PLATFORM_H_
#define TOWER_DEVICE_CPU_PLATFORM_H_

#include <memory>

#include "device/platform.h"

namespace tower {

std::unique_ptr<Platform> CreateCpuPlatform();

// Cores this process may run on: sched_getaffinity's count (honours taskset and cgroup
// cpusets), else the cores online; at least 1.
int UsableCores();

}  // namespace tower

#endif  // TOWER_DEVICE_CPU_PLATFORM_H_
