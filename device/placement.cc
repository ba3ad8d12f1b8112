#include "device/placement.h"

#include <algorithm>

#include "util/logging.h"
#include "util/strings.h"

namespace tower {
namespace {

struct ScopeEntry {
  const DeviceScope* owner;
  StatusOr<DeviceName> name;
};

// Each thread has its own stack: replicas place their ops independently.
std::vector<ScopeEntry>& ScopeStack() {
  thread_local std::vector<ScopeEntry> stack;
  return stack;
}

// `inner` overrides what it names; a device component replaces the outer one whole.
DeviceName Merge(DeviceName outer, const DeviceName& inner) {
  if (inner.job) outer.job = inner.job;
  if (inner.replica) outer.replica = inner.replica;
  if (inner.task) outer.task = inner.task;
  if (inner.has_device()) {
    outer.type = inner.type;
    outer.id = inner.id;
    outer.physical = inner.physical;
  }
  return outer;
}

bool HasKernel(const std::vector<std::string>& types, const std::string& type) {
  return std::find(types.begin(), types.end(), type) != types.end();
}

}  // namespace

DeviceScope::DeviceScope(std::string_view spec) {
  StatusOr<DeviceName> name = DeviceName::Parse(spec);
  if (!name.ok()) status_ = name.status();
  ScopeStack().push_back(ScopeEntry{this, std::move(name)});
}

DeviceScope::~DeviceScope() {
  std::vector<ScopeEntry>& stack = ScopeStack();
  TOWER_CHECK(!stack.empty() && stack.back().owner == this)
      << "DeviceScopes must be destroyed in reverse order of creation, on their own thread";
  stack.pop_back();
}

StatusOr<DeviceName> DeviceScope::Current() {
  DeviceName merged;
  for (const ScopeEntry& entry : ScopeStack()) {
    if (!entry.name.ok()) return entry.name.status();
    merged = Merge(std::move(merged), *entry.name);
  }
  return merged;
}

StatusOr<Device*> PlaceOp(Context& context, std::string_view op,
                          const std::vector<std::string>& kernel_device_types,
                          Device* input_device) {
  if (kernel_device_types.empty()) {
    return NotFoundError("Op " + std::string(op) + " has no kernel for any device type");
  }
  TOWER_ASSIGN_OR_RETURN(DeviceName requested, DeviceScope::Current());
  Device* device = nullptr;
  if (requested.has_device() || requested.job || requested.task || requested.replica) {
    TOWER_ASSIGN_OR_RETURN(device, context.FindDevice(requested));
  } else if (input_device != nullptr) {
    device = input_device;
  } else {
    TOWER_ASSIGN_OR_RETURN(device, context.DefaultDevice());
  }
  if (!HasKernel(kernel_device_types, device->device_type())) {
    // No kernel for this device type: fall back to the CPU when it has one.
    if (!HasKernel(kernel_device_types, kDeviceTypeCpu)) {
      return NotFoundError("Op " + std::string(op) + " has no kernel for " +
                           device->device_type() + " (" + device->full_name() +
                           ") and none for CPU; it has kernels for " +
                           Join(kernel_device_types, ", "));
    }
    TOWER_ASSIGN_OR_RETURN(std::vector<Device*> cpus, context.Devices(kDeviceTypeCpu));
    Device* cpu = cpus.front();
    // Stay on the input's CPU device (a logical CPU of a replica) when there is one.
    if (input_device != nullptr && input_device->is_cpu()) cpu = input_device;
    device = cpu;
  }
  LogPlacement(context, op, *device);
  return device;
}

void LogPlacement(const Context& context, std::string_view op, const Device& device) {
  if (!context.GetLogDevicePlacement()) return;
  std::string line = "Executing op ";
  line.append(op.data(), op.size());
  line += " in device ";
  line += device.full_name();
  LogRaw(LogSeverity::kInfo, line);
}

}  // namespace tower
