#include "ops/kernel_registry.h"

#include <vector>

#include "util/strings.h"

namespace tower {

KernelFn OpKernels::Find(const Device& device) const {
  const int n = size_.load(std::memory_order_acquire);
  const int kind = device.kind();
  for (int i = 0; i < n; ++i) {
    if (entries_[i].kind == kind) return entries_[i].fn;
  }
  return nullptr;
}

std::string OpKernels::DescribeKernels() const {
  std::vector<std::string> types;
  const int n = size_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    types.push_back(entries_[i].device_type + " (" + entries_[i].platform + ")");
  }
  return types.empty() ? "none" : Join(types, ", ");
}

void KernelRegistry::Register(std::string_view op, std::string_view device_type,
                              std::string_view platform, KernelFn fn) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ops_.find(op);
  if (it == ops_.end()) {
    it = ops_.emplace(std::string(op), std::make_unique<OpKernels>(std::string(op))).first;
  }
  OpKernels& kernels = *it->second;
  const int kind = DeviceKindId(device_type, platform);
  const int n = kernels.size_.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) {
    OpKernels::Entry& entry = kernels.entries_[i];
    if (entry.kind == kind) {
      // Readers run lock-free, so a registered kernel is never swapped for another.
      TOWER_CHECK(entry.fn == fn) << "a different kernel for " << op << " on " << device_type
                                  << " (" << platform << ") is already registered";
      return;
    }
  }
  TOWER_CHECK(n < OpKernels::kMaxKernels) << "too many kernels for op " << op;
  kernels.entries_[n] = OpKernels::Entry{std::string(device_type), std::string(platform), kind, fn};
  kernels.size_.store(n + 1, std::memory_order_release);
}

const OpKernels& KernelRegistry::Op(std::string_view op) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ops_.find(op);
  if (it == ops_.end()) {
    it = ops_.emplace(std::string(op), std::make_unique<OpKernels>(std::string(op))).first;
  }
  return *it->second;
}

}  // namespace tower
