#include "device/cpu_platform.h"

#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "device/device_name.h"
#include "device/host_memory_source.h"
#include "util/strings.h"

namespace tower {
namespace {

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "CPU";
}

uint64_t TotalHostMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? static_cast<uint64_t>(pages) * page_size : 0;
}

// MemAvailable from /proc/meminfo, in bytes.
StatusOr<uint64_t> AvailableHostMemory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return UnavailableError("/proc/meminfo has no MemAvailable line");
}

}  // namespace

int UsableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

namespace {

class CpuPlatform : public Platform {
 public:
  CpuPlatform() {
    PhysicalDeviceInfo info;
    info.device_type = kDeviceTypeCpu;
    info.index = 0;
    info.model = CpuModel();
    info.total_memory_bytes = TotalHostMemory();
    info.cores = UsableCores();
    devices_.push_back(info);
  }

  std::string device_type() const override { return kDeviceTypeCpu; }
  std::string name() const override { return "Host"; }
  Status status() const override { return OkStatus(); }
  std::string version() const override { return ""; }
  const std::vector<PhysicalDeviceInfo>& devices() const override { return devices_; }

  StatusOr<MemoryInfo> QueryMemoryInfo(int index) const override {
    TOWER_ASSIGN_OR_RETURN(uint64_t available, AvailableHostMemory());
    return MemoryInfo{available, devices_[0].total_memory_bytes};
  }

  StatusOr<std::unique_ptr<MemorySource>> CreateMemorySource(int index) override {
    return std::unique_ptr<MemorySource>(new HostMemorySource());
  }

  StatusOr<std::unique_ptr<DeviceStream>> CreateStream(int index) override {
    return std::unique_ptr<DeviceStream>(new HostStream());
  }

 private:
  std::vector<PhysicalDeviceInfo> devices_;
};

}  // namespace

std::unique_ptr<Platform> CreateCpuPlatform() { return std::make_unique<CpuPlatform>(); }

}  // namespace tower
