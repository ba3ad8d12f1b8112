// KernelRegistry: which code runs op X on device Y. One registry, keyed by (op, device
// type), each kernel also naming the platform whose memory it works on ("Host" for CPU
// kernels, "CUDA" for GPU kernels; tests add GPU kernels for their fake platform).
//
// The global registry holds the CPU kernels and this build's GPU kernels (none without
// --config=cuda). Ops with a CPU kernel only (Cast) fall back to the CPU.
#ifndef TOWER_OPS_KERNEL_REGISTRY_H_
#define TOWER_OPS_KERNEL_REGISTRY_H_

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "device/placement.h"
#include "ops/kernel.h"

namespace tower {

// The kernels of one op. Handed out once per op and kept for the life of the process, so
// eager ops look kernels up without touching the registry's map.
class OpKernels : public KernelSupport {
 public:
  static constexpr int kMaxKernels = 8;

  explicit OpKernels(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  // The kernel for `device`, or nullptr.
  KernelFn Find(const Device& device) const;

  bool HasKernelFor(const Device& device) const override { return Find(device) != nullptr; }
  std::string DescribeKernels() const override;

 private:
  friend class KernelRegistry;
  struct Entry {
    std::string device_type;
    std::string platform;
    int kind;  // DeviceKindId(device_type, platform)
    KernelFn fn;
  };
  const std::string name_;
  // Written under the registry's mutex; read lock-free (entries are never changed once
  // counted in `size_`).
  std::array<Entry, kMaxKernels> entries_;
  std::atomic<int> size_{0};
};

class KernelRegistry {
 public:
  // CPU kernels plus this build's GPU kernels, registered on first use.
  static KernelRegistry& Global();

  // Adds the kernel of `op` for devices of `device_type` on `platform`. Registering the
  // same kernel again does nothing; a different one for the same key is a programming error.
  void Register(std::string_view op, std::string_view device_type, std::string_view platform,
                KernelFn fn);
  // The op's kernels; created empty if the op has none yet. The pointer stays valid.
  const OpKernels& Op(std::string_view op);

 private:
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<OpKernels>, std::less<>> ops_;
};

// Registered by ops/cpu and ops/cuda (or the stub when CUDA is not compiled in).
void RegisterCpuKernels(KernelRegistry& registry);
void RegisterGpuKernels(KernelRegistry& registry);

// Platform names kernels register under.
inline constexpr char kHostPlatform[] = "Host";
inline constexpr char kCudaPlatform[] = "CUDA";

}  // namespace tower

#endif  // TOWER_OPS_KERNEL_REGISTRY_H_
