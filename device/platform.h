// Platform: a kind of hardware that has physical devices (the host CPU, CUDA GPUs).
//
// The CPU platform always exists. The GPU platform is chosen by the build (the BUILD
// file picks device/cuda/cuda_platform.cc under --config=cuda, device/gpu_platform_stub.cc
// otherwise); the API here has no #ifdef. A platform that cannot be used — CUDA not
// compiled in, no driver, no GPU — has zero devices and says why in status(); that is not
// an error for the rest of Tower.
#ifndef TOWER_DEVICE_PLATFORM_H_
#define TOWER_DEVICE_PLATFORM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/memory_source.h"
#include "device/stream.h"
#include "util/statusor.h"

namespace tower {

struct PhysicalDeviceInfo {
  std::string device_type;  // "CPU" or "GPU"
  int index = 0;            // among this platform's devices: /physical_device:GPU:<index>
  std::string model;        // "NVIDIA H100 80GB HBM3", "AMD EPYC"
  // GPUs: "GPU-1a2b3c4d-...". Two logical GPUs share a card exactly when their physical
  // devices have the same UUID (never decided by counting devices).
  std::string uuid;
  std::string pci_bus_id;   // "0000:65:00.0"; empty for the CPU
  uint64_t total_memory_bytes = 0;
  int compute_capability_major = 0;  // 0 for the CPU
  int compute_capability_minor = 0;
  int cores = 0;  // CPU cores this process may use, or GPU streaming multiprocessors

  // "/physical_device:GPU:0"
  std::string name() const;
};

struct MemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

class Platform {
 public:
  virtual ~Platform() = default;

  virtual std::string device_type() const = 0;  // "CPU", "GPU"
  virtual std::string name() const = 0;         // "Host", "CUDA"
  // OK, or why this platform has no devices.
  virtual Status status() const = 0;
  // Library and driver versions, for `tower devices`; may be empty.
  virtual std::string version() const = 0;
  virtual const std::vector<PhysicalDeviceInfo>& devices() const = 0;
  // Memory free right now. For a GPU this creates the device's CUDA context.
  virtual StatusOr<MemoryInfo> QueryMemoryInfo(int index) const = 0;
  // Where a logical device on physical device `index` takes its memory from.
  virtual StatusOr<std::unique_ptr<MemorySource>> CreateMemorySource(int index) = 0;
  // A new stream (an independent queue of work) on physical device `index`; each logical
  // device gets its own.
  virtual StatusOr<std::unique_ptr<DeviceStream>> CreateStream(int index) = 0;
};

}  // namespace tower

#endif  // TOWER_DEVICE_PLATFORM_H_
