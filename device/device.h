// Device: a logical device of the initialised runtime (a logical CPU, a logical GPU — one of
// possibly several on one card). It owns the allocator every tensor on it draws from.
#ifndef TOWER_DEVICE_DEVICE_H_
#define TOWER_DEVICE_DEVICE_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "device/bfc_allocator.h"
#include "device/config_types.h"
#include "device/device_name.h"
#include "device/platform.h"
#include "device/stream.h"

namespace tower {

class Context;

// A small number standing for a (device type, platform) pair, the same for the life of the
// process: kernel lookups (ops/kernel_registry.h) compare it on every eager op instead of
// two strings (the comparisons took about 5 % of a small `linreg` step).
int DeviceKindId(std::string_view device_type, std::string_view platform);

class Device {
 public:
  Device(Context* context, DeviceName name, PhysicalDeviceInfo physical, Platform* platform,
         std::unique_ptr<BfcAllocator> allocator, std::unique_ptr<DeviceStream> stream);

  const DeviceName& name() const { return name_; }
  // "/job:localhost/replica:0/task:0/device:GPU:1"
  const std::string& full_name() const { return full_name_; }
  // "GPU:1": short, for log lines and tables.
  std::string short_name() const;
  const std::string& device_type() const { return *name_.type; }
  // Index among the logical devices of this type.
  int id() const { return *name_.id; }
  bool is_cpu() const;
  bool is_gpu() const;

  // The context that created this device.
  Context* context() const { return context_; }
  const PhysicalDeviceInfo& physical() const { return physical_; }
  Platform* platform() const { return platform_; }
  // platform()->name(), kept here so kernel lookups do not build strings.
  const std::string& platform_name() const { return platform_name_; }
  // DeviceKindId(device_type(), platform_name()): what a kernel lookup compares.
  int kind() const { return kind_; }
  BfcAllocator& allocator() const { return *allocator_; }
  DeviceStream& stream() const { return *stream_; }
  bool memory_growth() const { return allocator_->options().allow_growth; }
  uint64_t memory_limit_bytes() const { return allocator_->options().limit_bytes; }

  // State a kernel library keeps per device (ops/cuda: the cuBLAS handle and its workspace),
  // one slot per library named by `key`: made by `make` on first use, destroyed with the
  // device, before its stream and allocator (a workspace goes back to the allocator).
  class Resource {
   public:
    virtual ~Resource() = default;
  };
  StatusOr<Resource*> GetOrCreateResource(
      std::string_view key, const std::function<StatusOr<std::unique_ptr<Resource>>()>& make);

  LogicalDevice logical_device() const { return LogicalDevice{full_name_, device_type()}; }
  // Same physical device (same card, decided by UUID for GPUs).
  bool SharesPhysicalDeviceWith(const Device& other) const;

 private:
  Context* const context_;
  const DeviceName name_;
  const std::string full_name_;
  const PhysicalDeviceInfo physical_;
  Platform* const platform_;
  const std::string platform_name_;
  const int kind_;
  const std::unique_ptr<BfcAllocator> allocator_;
  const std::unique_ptr<DeviceStream> stream_;
  // Declared last: destroyed first.
  std::mutex resources_mu_;
  std::map<std::string, std::unique_ptr<Resource>, std::less<>> resources_;
};

}  // namespace tower

#endif  // TOWER_DEVICE_DEVICE_H_
