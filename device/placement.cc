#include "device/placement.h"

#include <algorithm>

#include "util/fiber.h"
#include "util/logging.h"
#include "util/strings.h"

namespace tower {
namespace {

struct ScopeEntry {
  const DeviceScope* owner;
  // This scope merged with every outer one, computed when the scope is entered (so ops do
  // not merge names on every call), or the parse error of the innermost malformed scope.
  StatusOr<DeviceName> merged;
  bool requests_something;
  // The device `merged` resolved to in the context with id `resolved_in` (0: none yet):
  // every op of a replica's step runs under its device's scope, and finding the device by
  // name (canonicalising, comparing the names of every device) cost 4.6 % of a `linreg`
  // step of 8 replicas. Only exact answers are kept (Context::FindDevice's `exact`), which
  // hold as long as the context lives; an id, unlike an address, is never reused.
  uint64_t resolved_in = 0;
  Device* resolved = nullptr;
};

// Each thread has its own stack, and each replica fiber when replicas share a thread
// (util/fiber.h): replicas place their ops independently.
std::vector<ScopeEntry>& ScopeStack() {
  static FiberLocal<std::vector<ScopeEntry>> stack;
  return stack.Get();
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

}  // namespace

DeviceScope::DeviceScope(std::string_view spec) { Enter(DeviceName::Parse(spec)); }

DeviceScope::DeviceScope(const DeviceName& name) { Enter(name); }

DeviceScope::DeviceScope(Device& device) { Enter(device.name(), &device); }

void DeviceScope::Enter(const StatusOr<DeviceName>& name, Device* resolved) {
  std::vector<ScopeEntry>& stack = ScopeStack();
  if (!name.ok()) status_ = name.status();
  if (!name.ok() || (!stack.empty() && !stack.back().merged.ok())) {
    // An outer malformed scope stays in force (its error wins, as it came first).
    Status error = !stack.empty() && !stack.back().merged.ok() ? stack.back().merged.status()
                                                              : name.status();
    stack.push_back(ScopeEntry{this, std::move(error), true});
    return;
  }
  DeviceName merged = stack.empty() ? DeviceName() : *stack.back().merged;
  merged = Merge(std::move(merged), *name);
  const bool requests = merged.has_device() || merged.job || merged.replica || merged.task;
  stack.push_back(ScopeEntry{this, std::move(merged), requests});
  // A device's full name overrides every outer component: the merge names that device, an
  // exact answer in its context, as FindDevice would give it.
  if (resolved != nullptr) {
    stack.back().resolved_in = resolved->context()->id();
    stack.back().resolved = resolved;
  }
}

DeviceScope::~DeviceScope() {
  std::vector<ScopeEntry>& stack = ScopeStack();
  TOWER_CHECK(!stack.empty() && stack.back().owner == this)
      << "DeviceScopes must be destroyed in reverse order of creation, on their own thread";
  stack.pop_back();
}

StatusOr<DeviceName> DeviceScope::Current() {
  const std::vector<ScopeEntry>& stack = ScopeStack();
  if (stack.empty()) return DeviceName();
  return stack.back().merged;
}

StatusOr<Device*> DeviceScope::CurrentDevice(Context& context) {
  std::vector<ScopeEntry>& stack = ScopeStack();
  if (stack.empty()) return static_cast<Device*>(nullptr);
  ScopeEntry& top = stack.back();
  if (!top.merged.ok()) return top.merged.status();
  if (!top.requests_something) return static_cast<Device*>(nullptr);
  if (top.resolved_in == context.id()) return top.resolved;
  bool exact = false;
  TOWER_ASSIGN_OR_RETURN(Device * device, context.FindDevice(*top.merged, &exact));
  if (exact) {
    top.resolved_in = context.id();
    top.resolved = device;
  }
  return device;
}

StatusOr<Device*> PlaceOp(Context& context, std::string_view op, const KernelSupport& kernels,
                          Device* input_device) {
  // The scopes' device, else the inputs' GPU, else the default device (the inputs' logical
  // CPU where the default is a CPU).
  TOWER_ASSIGN_OR_RETURN(Device * device, DeviceScope::CurrentDevice(context));
  if (device == nullptr && input_device != nullptr && !input_device->is_cpu()) {
    device = input_device;
  }
  if (device == nullptr) {
    TOWER_ASSIGN_OR_RETURN(device, context.DefaultDevice());
    if (device->is_cpu() && input_device != nullptr) device = input_device;
  }
  if (!kernels.HasKernelFor(*device)) {
    // No kernel for this device type: fall back to a CPU — the inputs' logical CPU when
    // they are on one, else CPU:0 — if it has a kernel.
    Device* cpu = input_device != nullptr && input_device->is_cpu() ? input_device : nullptr;
    if (cpu == nullptr) {
      TOWER_ASSIGN_OR_RETURN(std::vector<Device*> cpus, context.Devices(kDeviceTypeCpu));
      cpu = cpus.front();
    }
    if (!kernels.HasKernelFor(*cpu)) {
      return NotFoundError("Op " + std::string(op) + " has no kernel for " +
                           device->device_type() + " (" + device->full_name() +
                           ") nor for CPU; it has kernels for: " + kernels.DescribeKernels());
    }
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
