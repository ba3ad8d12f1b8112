#include "device/context.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "device/cpu_platform.h"
#include "device/gpu_platform.h"
#include "util/fiber.h"
#include "util/logging.h"
#include "util/strings.h"

namespace tower {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

std::string ListNames(const std::vector<std::unique_ptr<Device>>& devices) {
  std::vector<std::string> names;
  for (const auto& device : devices) names.push_back(device->full_name());
  return Join(names, ", ");
}

}  // namespace

uint64_t GpuMemoryReserveBytes(uint64_t total_bytes) {
  return std::max<uint64_t>(256 * kMiB, total_bytes / 20);
}

StatusOr<std::optional<bool>> ForceGpuAllowGrowthFromEnv() {
  const char* value = std::getenv("TF_FORCE_GPU_ALLOW_GROWTH");
  if (value == nullptr) return std::optional<bool>();
  const std::string lower = ToLower(value);
  if (lower == "true") return std::optional<bool>(true);
  if (lower == "false") return std::optional<bool>(false);
  return InvalidArgumentError(std::string("TF_FORCE_GPU_ALLOW_GROWTH='") + value +
                              "' is not a valid value: set it to true or false, or unset it");
}

Context& Context::Global() {
  // Built on first use and never destroyed: tensors and CUDA state may outlive main().
  static Context* const context = [] {
    std::vector<std::unique_ptr<Platform>> platforms;
    platforms.push_back(CreateCpuPlatform());
    platforms.push_back(CreateGpuPlatform());
    return new Context(std::move(platforms));
  }();
  return *context;
}

namespace {
// Per thread, and per replica fiber when replicas share a thread (util/fiber.h).
Context*& DefaultContextSlot() {
  static FiberLocal<Context*> slot;
  return slot.Get();
}
}  // namespace

Context& Context::Default() {
  Context* context = DefaultContextSlot();
  return context != nullptr ? *context : Global();
}

ScopedDefaultContext::ScopedDefaultContext(Context& context)
    : previous_(DefaultContextSlot()) {
  DefaultContextSlot() = &context;
}

ScopedDefaultContext::~ScopedDefaultContext() { DefaultContextSlot() = previous_; }

namespace {
uint64_t NextContextId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

Context::Context(std::vector<std::unique_ptr<Platform>> platforms, ContextOptions options)
    : id_(NextContextId()), platforms_(std::move(platforms)), options_(std::move(options)) {
  int cpus = 0;
  for (size_t i = 0; i < platforms_.size(); ++i) {
    if (platforms_[i]->device_type() == kDeviceTypeCpu) ++cpus;
    for (size_t j = 0; j < i; ++j) {
      TOWER_CHECK(platforms_[i]->device_type() != platforms_[j]->device_type())
          << "two platforms of type " << platforms_[i]->device_type();
    }
  }
  TOWER_CHECK(cpus == 1) << "a Context needs exactly one CPU platform";
}

Context::~Context() = default;

Platform* Context::GetPlatform(std::string_view device_type) const {
  const std::string type = ToUpper(device_type);
  for (const auto& platform : platforms_) {
    if (platform->device_type() == type) return platform.get();
  }
  return nullptr;
}

std::vector<PhysicalDevice> Context::ListPhysicalDevices(std::string_view device_type) const {
  const std::string type = ToUpper(device_type);
  std::vector<PhysicalDevice> out;
  // CPU first, then the other platforms in the order given.
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& platform : platforms_) {
      const bool is_cpu = platform->device_type() == kDeviceTypeCpu;
      if (is_cpu != (pass == 0)) continue;
      if (!type.empty() && platform->device_type() != type) continue;
      for (const PhysicalDeviceInfo& info : platform->devices()) {
        out.push_back(PhysicalDevice{info.name(), info.device_type});
      }
    }
  }
  return out;
}

StatusOr<Context::PhysicalEntry> Context::LookUpLocked(const PhysicalDevice& device) const {
  Platform* platform = GetPlatform(device.device_type);
  if (platform != nullptr) {
    for (const PhysicalDeviceInfo& info : platform->devices()) {
      if (info.name() == device.name && info.device_type == device.device_type) {
        return PhysicalEntry{platform, &info};
      }
    }
  }
  std::vector<std::string> known;
  for (const PhysicalDevice& d : ListPhysicalDevices()) known.push_back(d.name);
  return InvalidArgumentError("Unrecognized device: " + device.ToString() +
                              "; this process has " + Join(known, ", ") +
                              " (see ListPhysicalDevices)");
}

StatusOr<PhysicalDeviceInfo> Context::GetDeviceDetails(const PhysicalDevice& device) const {
  std::lock_guard<std::mutex> lock(mu_);
  TOWER_ASSIGN_OR_RETURN(PhysicalEntry entry, LookUpLocked(device));
  return *entry.info;
}

StatusOr<MemoryInfo> Context::QueryMemoryInfo(const PhysicalDevice& device) const {
  PhysicalEntry entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TOWER_ASSIGN_OR_RETURN(entry, LookUpLocked(device));
  }
  return entry.platform->QueryMemoryInfo(entry.info->index);
}

Status Context::SetJobAndTask(std::string job, int task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.job == job && options_.task == task) return OkStatus();
  if (initialized_) {
    return FailedPreconditionError("the devices are already named /job:" + options_.job +
                                   "/task:" + std::to_string(options_.task) +
                                   "; set the job and task before the first logical-device "
                                   "listing, tensor or strategy");
  }
  StatusOr<DeviceName> check = DeviceName::Parse("/job:" + job + "/task:" + std::to_string(task));
  if (!check.ok()) return check.status();
  options_.job = std::move(job);
  options_.task = task;
  return OkStatus();
}

Status Context::RefuseAfterInit(const char* message) const {
  return FailedPreconditionError(std::string(message) +
                                 " (configure devices before the first logical-device "
                                 "listing, tensor or strategy)");
}

Status Context::SetThreads(std::atomic<int>& setting, int num_threads, const char* what,
                          const char* initialized_error) {
  if (num_threads < 0) {
    return InvalidArgumentError(std::string(what) + " must be 0 (the system picks: one per " +
                                "core) or a positive number of threads, got " +
                                std::to_string(num_threads));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (setting.load() == num_threads) return OkStatus();
  if (initialized_) {
    return FailedPreconditionError(std::string(initialized_error) + " (it is " +
                                   std::to_string(setting.load()) +
                                   "; set thread counts before the first logical-device "
                                   "listing, tensor or strategy)");
  }
  setting.store(num_threads);
  return OkStatus();
}

Status Context::SetIntraOpParallelismThreads(int num_threads) {
  return SetThreads(intra_op_threads_, num_threads, "intra-op parallelism",
                    kIntraOpInitializedError);
}

Status Context::SetInterOpParallelismThreads(int num_threads) {
  return SetThreads(inter_op_threads_, num_threads, "inter-op parallelism",
                    kInterOpInitializedError);
}

bool Context::IsVisibleLocked(const std::string& name) const {
  return !visible_ || std::find(visible_->begin(), visible_->end(), name) != visible_->end();
}

Status Context::SetVisibleDevices(const std::vector<PhysicalDevice>& devices,
                                  std::string_view device_type) {
  const std::string type = ToUpper(device_type);
  std::lock_guard<std::mutex> lock(mu_);
  if (!type.empty() && GetPlatform(type) == nullptr) {
    return InvalidArgumentError("Unknown device type '" + std::string(device_type) +
                                "'; use \"CPU\" or \"GPU\"");
  }
  std::vector<std::string> wanted;
  for (const PhysicalDevice& device : devices) {
    TOWER_RETURN_IF_ERROR(LookUpLocked(device).status());
    if (!type.empty() && device.device_type != type) {
      return InvalidArgumentError("Unrecognized device: " + device.ToString() +
                                  " is not of type " + type);
    }
    wanted.push_back(device.name);
  }
  // Devices of other types keep their visibility when a type is given.
  std::vector<std::string> next;
  for (const PhysicalDevice& device : ListPhysicalDevices()) {
    const bool listed = std::find(wanted.begin(), wanted.end(), device.name) != wanted.end();
    const bool untouched = !type.empty() && device.device_type != type;
    if (listed || (untouched && IsVisibleLocked(device.name))) next.push_back(device.name);
  }
  const std::string cpu = DeviceName::Physical(kDeviceTypeCpu, 0).ToString();
  if (std::find(next.begin(), next.end(), cpu) == next.end()) {
    return InvalidArgumentError(
        "The CPU cannot be hidden: " + cpu +
        " must stay visible. To hide GPUs only, call SetVisibleDevices(gpus, \"GPU\")");
  }
  std::vector<std::string> current;
  for (const PhysicalDevice& device : ListPhysicalDevices()) {
    if (IsVisibleLocked(device.name)) current.push_back(device.name);
  }
  if (next == current) return OkStatus();
  if (initialized_) return RefuseAfterInit(kVisibleDevicesInitializedError);
  visible_ = std::move(next);
  return OkStatus();
}

std::vector<PhysicalDevice> Context::GetVisibleDevices(std::string_view device_type) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<PhysicalDevice> out;
  for (const PhysicalDevice& device : ListPhysicalDevices(device_type)) {
    if (IsVisibleLocked(device.name)) out.push_back(device);
  }
  return out;
}

Status Context::SetMemoryGrowth(const PhysicalDevice& device, bool enable) {
  std::lock_guard<std::mutex> lock(mu_);
  TOWER_ASSIGN_OR_RETURN(PhysicalEntry entry, LookUpLocked(device));
  if (entry.info->device_type != kDeviceTypeGpu) {
    return InvalidArgumentError("Cannot set memory growth on " + device.name +
                                ": memory growth applies to GPUs (CPU devices always grow; "
                                "cap them with SetLogicalDeviceConfiguration)");
  }
  auto it = memory_growth_.find(device.name);
  const bool current = it == memory_growth_.end() ? true : it->second;
  if (current == enable) return OkStatus();
  if (initialized_) return RefuseAfterInit(kPhysicalDevicesInitializedError);
  memory_growth_[device.name] = enable;
  return OkStatus();
}

StatusOr<bool> Context::EffectiveGrowthLocked(const std::string& name) const {
  TOWER_ASSIGN_OR_RETURN(std::optional<bool> forced, ForceGpuAllowGrowthFromEnv());
  if (forced) return *forced;
  auto it = memory_growth_.find(name);
  return it == memory_growth_.end() ? true : it->second;
}

StatusOr<bool> Context::GetMemoryGrowth(const PhysicalDevice& device) const {
  std::lock_guard<std::mutex> lock(mu_);
  TOWER_ASSIGN_OR_RETURN(PhysicalEntry entry, LookUpLocked(device));
  if (entry.info->device_type != kDeviceTypeGpu) return true;
  return EffectiveGrowthLocked(device.name);
}

Status Context::SetLogicalDeviceConfiguration(
    const PhysicalDevice& device, const std::vector<LogicalDeviceConfiguration>& configs) {
  std::lock_guard<std::mutex> lock(mu_);
  TOWER_ASSIGN_OR_RETURN(PhysicalEntry entry, LookUpLocked(device));
  uint64_t sum = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!configs[i].memory_limit_mb) continue;
    const int64_t mb = *configs[i].memory_limit_mb;
    if (mb <= 0 || mb > (int64_t{1} << 40)) {
      return InvalidArgumentError("memory_limit_mb of logical device " + std::to_string(i) +
                                  " on " + device.name + " is " + std::to_string(mb) +
                                  "; it must be a positive number of MiB");
    }
    sum += static_cast<uint64_t>(mb) * kMiB;
  }
  const uint64_t total = entry.info->total_memory_bytes;
  if (total > 0 && sum > total) {
    return InvalidArgumentError("The memory limits of the logical devices on " + device.name +
                                " add up to " + std::to_string(sum / kMiB) +
                                " MiB, more than its " + std::to_string(total / kMiB) +
                                " MiB");
  }
  auto it = logical_configs_.find(device.name);
  const bool unchanged = it == logical_configs_.end()
                             ? configs.empty()
                             : (it->second == configs);
  if (unchanged) return OkStatus();
  if (initialized_) return RefuseAfterInit(kVirtualDevicesInitializedError);
  if (configs.empty()) {
    logical_configs_.erase(device.name);
  } else {
    logical_configs_[device.name] = configs;
  }
  return OkStatus();
}

StatusOr<std::vector<LogicalDeviceConfiguration>> Context::GetLogicalDeviceConfiguration(
    const PhysicalDevice& device) const {
  std::lock_guard<std::mutex> lock(mu_);
  TOWER_RETURN_IF_ERROR(LookUpLocked(device).status());
  auto it = logical_configs_.find(device.name);
  if (it == logical_configs_.end()) return std::vector<LogicalDeviceConfiguration>();
  return it->second;
}

Status Context::SetPerProcessMemoryFraction(double fraction) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!(fraction > 0.0 && fraction <= 1.0)) {  // also rejects NaN
    return InvalidArgumentError("per-process GPU memory fraction must be in (0, 1], got " +
                                std::to_string(fraction));
  }
  if (memory_fraction_ == fraction) return OkStatus();
  if (initialized_) return RefuseAfterInit(kPhysicalDevicesInitializedError);
  memory_fraction_ = fraction;
  return OkStatus();
}

std::optional<double> Context::GetPerProcessMemoryFraction() const {
  std::lock_guard<std::mutex> lock(mu_);
  return memory_fraction_;
}

bool Context::IsInitialized() const { return initialized_.load(); }

Status Context::EnsureInitialized() {
  if (initialized_.load(std::memory_order_acquire)) return OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  if (initialized_.load()) return OkStatus();
  return InitializeLocked();
}

Status Context::CreateLogicalDevicesLocked(Platform* platform, const PhysicalDeviceInfo& info,
                                           bool growth, int* next_id,
                                           std::vector<std::unique_ptr<Device>>* out) {
  const std::string physical_name = info.name();
  std::vector<LogicalDeviceConfiguration> configs(1);
  auto it = logical_configs_.find(physical_name);
  if (it != logical_configs_.end()) configs = it->second;

  // Limits in bytes, one per logical device.
  std::vector<uint64_t> limits(configs.size(), 0);
  uint64_t explicit_sum = 0;
  size_t unlimited = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (configs[i].memory_limit_mb) {
      limits[i] = static_cast<uint64_t>(*configs[i].memory_limit_mb) * kMiB;
      explicit_sum += limits[i];
    } else {
      ++unlimited;
    }
  }
  const bool is_gpu = info.device_type == kDeviceTypeGpu;
  if (!is_gpu) {
    // Logical CPUs always grow, and one without a limit may use all of the host's memory.
    growth = true;
    for (size_t i = 0; i < configs.size(); ++i) {
      if (!configs[i].memory_limit_mb) limits[i] = info.total_memory_bytes;
    }
  } else if (unlimited > 0) {
    uint64_t pool = info.total_memory_bytes;
    std::string pool_source = "the card's total memory";
    if (memory_fraction_) {
      pool = static_cast<uint64_t>(*memory_fraction_ * static_cast<double>(info.total_memory_bytes));
      pool_source = "the per-process memory fraction";
    } else if (!growth) {
      TOWER_ASSIGN_OR_RETURN(MemoryInfo memory, platform->QueryMemoryInfo(info.index));
      const uint64_t reserve = GpuMemoryReserveBytes(info.total_memory_bytes);
      pool = memory.free_bytes > reserve ? memory.free_bytes - reserve : 0;
      pool_source = "the free memory less a reserve of " + HumanBytes(reserve);
    }
    const uint64_t share = pool > explicit_sum ? (pool - explicit_sum) / unlimited : 0;
    if (share < kMiB) {
      return ResourceExhaustedError(
          "No memory left for the logical devices without a memory limit on " + physical_name +
          ": " + pool_source + " is " + HumanBytes(pool) + " and the explicit limits take " +
          HumanBytes(explicit_sum) + ". Give every logical device a memory_limit_mb, or lower "
          "the limits");
    }
    for (size_t i = 0; i < configs.size(); ++i) {
      if (!configs[i].memory_limit_mb) limits[i] = share;
    }
  }

  for (size_t i = 0; i < configs.size(); ++i) {
    DeviceName name = DeviceName::Full(options_.job, options_.replica, options_.task,
                                       info.device_type, (*next_id)++);
    TOWER_ASSIGN_OR_RETURN(std::unique_ptr<MemorySource> source,
                           platform->CreateMemorySource(info.index));
    AllocatorOptions allocator_options;
    allocator_options.limit_bytes = limits[i];
    allocator_options.allow_growth = growth;
    TOWER_ASSIGN_OR_RETURN(
        std::unique_ptr<BfcAllocator> allocator,
        BfcAllocator::Create(name.ToString(), std::move(source), allocator_options));
    TOWER_ASSIGN_OR_RETURN(std::unique_ptr<DeviceStream> stream,
                           platform->CreateStream(info.index));
    out->push_back(std::make_unique<Device>(this, std::move(name), info,
                                            platform, std::move(allocator), std::move(stream)));
  }
  return OkStatus();
}

Status Context::InitializeLocked() {
  // A bad value is refused even without GPUs: the same command must not start failing
  // only once it meets a machine with a GPU.
  TOWER_RETURN_IF_ERROR(ForceGpuAllowGrowthFromEnv().status());
  std::vector<std::unique_ptr<Device>> devices;
  for (int pass = 0; pass < 2; ++pass) {  // CPU devices first, as ListPhysicalDevices
    for (const auto& platform : platforms_) {
      const bool is_cpu = platform->device_type() == kDeviceTypeCpu;
      if (is_cpu != (pass == 0)) continue;
      std::vector<const PhysicalDeviceInfo*> visible;
      for (const PhysicalDeviceInfo& info : platform->devices()) {
        if (IsVisibleLocked(info.name())) visible.push_back(&info);
      }
      // Memory growth must agree between the visible GPUs.
      std::vector<std::string> growing;
      std::vector<std::string> preallocating;
      for (const PhysicalDeviceInfo* info : visible) {
        if (info->device_type != kDeviceTypeGpu) continue;
        TOWER_ASSIGN_OR_RETURN(bool growth, EffectiveGrowthLocked(info->name()));
        (growth ? growing : preallocating).push_back(info->name());
      }
      if (!growing.empty() && !preallocating.empty()) {
        return InvalidArgumentError(
            std::string(kMemoryGrowthDiffersError) + ": growth is on for " +
            Join(growing, ", ") + " and off for " + Join(preallocating, ", ") +
            ". Call SetMemoryGrowth with the same value for every visible GPU");
      }
      const bool growth = preallocating.empty();
      int next_id = 0;
      for (const PhysicalDeviceInfo* info : visible) {
        Status status = CreateLogicalDevicesLocked(platform.get(), *info, growth, &next_id,
                                                   &devices);
        if (!status.ok()) {
          return status.WithContext("Could not initialize the devices of " + info->name());
        }
      }
    }
  }
  for (const auto& device : devices) {
    if (!device->is_gpu()) continue;  // as TensorFlow, log GPUs only
    const PhysicalDeviceInfo& info = device->physical();
    std::ostringstream line;
    line << "Created device " << device->full_name() << " with "
         << device->memory_limit_bytes() / kMiB << " MB memory "
         << (device->memory_growth() ? "limit (grows on demand)" : "(preallocated)")
         << ": -> device: " << info.index << ", name: " << info.model
         << ", pci bus id: " << info.pci_bus_id << ", compute capability: "
         << info.compute_capability_major << "." << info.compute_capability_minor;
    TOWER_LOG(INFO) << line.str();
  }
  devices_ = std::move(devices);
  initialized_.store(true, std::memory_order_release);
  return OkStatus();
}

StatusOr<std::vector<Device*>> Context::Devices(std::string_view device_type) {
  TOWER_RETURN_IF_ERROR(EnsureInitialized());
  const std::string type = ToUpper(device_type);
  std::vector<Device*> out;
  for (const auto& device : devices_) {
    if (type.empty() || device->device_type() == type) out.push_back(device.get());
  }
  return out;
}

StatusOr<std::vector<LogicalDevice>> Context::ListLogicalDevices(std::string_view device_type) {
  TOWER_ASSIGN_OR_RETURN(std::vector<Device*> devices, Devices(device_type));
  std::vector<LogicalDevice> out;
  for (Device* device : devices) out.push_back(device->logical_device());
  return out;
}

DeviceName Context::Canonicalize(const DeviceName& spec) const {
  if (spec.physical) return spec;
  DeviceName name = spec;
  if (!name.job) name.job = options_.job;
  if (!name.replica) name.replica = options_.replica;
  if (!name.task) name.task = options_.task;
  return name;
}

StatusOr<Device*> Context::DefaultDevice() {
  TOWER_RETURN_IF_ERROR(EnsureInitialized());
  for (const auto& device : devices_) {
    if (device->is_gpu()) return device.get();
  }
  return devices_.front().get();  // CPU:0 always exists
}

StatusOr<Device*> Context::FindDevice(std::string_view spec) {
  TOWER_ASSIGN_OR_RETURN(DeviceName name, DeviceName::Parse(spec));
  return FindDeviceImpl(name, GetSoftDevicePlacement());
}

StatusOr<Device*> Context::FindDevice(const DeviceName& spec, bool* exact) {
  return FindDeviceImpl(spec, GetSoftDevicePlacement(), exact);
}

StatusOr<Device*> Context::FindDeviceImpl(const DeviceName& spec, bool soft, bool* exact) {
  if (exact != nullptr) *exact = false;
  if (spec.physical) {
    return InvalidArgumentError("'" + spec.ToString() +
                                "' names a physical device; ops and tensors run on logical "
                                "devices such as /device:GPU:0 (see ListLogicalDevices)");
  }
  TOWER_RETURN_IF_ERROR(EnsureInitialized());
  const DeviceName full = Canonicalize(spec);
  // Without a device component, prefer a GPU of the named task, as DefaultDevice does.
  if (!spec.has_device()) {
    for (const auto& device : devices_) {
      if (device->is_gpu() && full.Matches(device->name())) {
        if (exact != nullptr) *exact = true;
        return device.get();
      }
    }
  }
  for (const auto& device : devices_) {
    if (full.Matches(device->name())) {
      if (exact != nullptr) *exact = true;
      return device.get();
    }
  }
  if (soft) {
    if (spec.type) {
      for (const auto& device : devices_) {
        if (device->device_type() == *spec.type) return device.get();
      }
    }
    return devices_.front().get();  // CPU:0
  }
  return NotFoundError(full.ToString() + " unknown device. Known devices: " +
                       ListNames(devices_) +
                       ". Use SetSoftDevicePlacement(true) to fall back to one of them");
}

StatusOr<AllocatorStats> Context::GetMemoryStats(std::string_view device) {
  TOWER_ASSIGN_OR_RETURN(DeviceName name, DeviceName::Parse(device));
  TOWER_ASSIGN_OR_RETURN(Device * found, FindDeviceImpl(name, /*soft=*/false));
  return found->allocator().GetStats();
}

Status Context::ResetMemoryStats(std::string_view device) {
  TOWER_ASSIGN_OR_RETURN(DeviceName name, DeviceName::Parse(device));
  TOWER_ASSIGN_OR_RETURN(Device * found, FindDeviceImpl(name, /*soft=*/false));
  found->allocator().ResetPeakStats();
  return OkStatus();
}

}  // namespace tower
