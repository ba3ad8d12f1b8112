// GPU platform for builds without CUDA: no devices, and a status that says how to get them.
#include "device/device_name.h"
#include "device/gpu_platform.h"

namespace tower {
namespace {

class NoGpuPlatform : public Platform {
 public:
  std::string device_type() const override { return kDeviceTypeGpu; }
  std::string name() const override { return "CUDA"; }
  Status status() const override {
    return UnavailableError(
        "Tower was built without CUDA; rebuild with --config=cuda to use GPUs");
  }
  std::string version() const override { return "not compiled in"; }
  const std::vector<PhysicalDeviceInfo>& devices() const override { return devices_; }
  StatusOr<MemoryInfo> QueryMemoryInfo(int index) const override { return status(); }
  StatusOr<std::unique_ptr<MemorySource>> CreateMemorySource(int index) override {
    return status();
  }
  StatusOr<std::unique_ptr<DeviceStream>> CreateStream(int index) override { return status(); }

 private:
  std::vector<PhysicalDeviceInfo> devices_;
};

}  // namespace

std::unique_ptr<Platform> CreateGpuPlatform() { return std::make_unique<NoGpuPlatform>(); }

bool GpuPlatformCompiledIn() { return false; }

}  // namespace tower
