// Context: the device configuration of a process and, once initialised, its logical devices.
//
// Two phases, as in TensorFlow's eager context:
//   1. Configuration. Physical devices can be listed, hidden, given memory growth, split
//      into logical devices with memory limits. Nothing is allocated yet.
//   2. Runtime. The first call that needs logical devices (ListLogicalDevices, the first
//      tensor, the first strategy) initialises: it creates every logical device and its
//      allocator. From then on each setter that would change something fails with
//      TensorFlow's FailedPrecondition text ("Virtual devices cannot be modified after
//      being initialized", ...); a setter that would change nothing succeeds.
//
// Memory policy per logical GPU (the default is never to grab a card):
//   growth on (the default, or TF_FORCE_GPU_ALLOW_GROWTH=true): memory is taken from the
//     card on demand, up to the logical device's limit;
//   growth off: the limit is taken from the card at initialisation.
//   limit: memory_limit_mb if the logical device has one; else the per-process fraction of
//     the card's total memory if set; else the card's total memory (growth on) or what is
//     free at initialisation less a reserve for cuBLAS and the CUDA context (growth off),
//     shared evenly by the card's logical devices that have no limit of their own.
// Growth and a limit combine: grow up to the limit (TensorFlow refuses the combination).
// Logical CPUs always grow; a memory_limit_mb caps them too.
//
// tower::config (device/config.h) is this API on the process's global context; tests and
// embedders can build their own Context over any platforms.
#ifndef TOWER_DEVICE_CONTEXT_H_
#define TOWER_DEVICE_CONTEXT_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "device/config_types.h"
#include "device/device.h"
#include "device/platform.h"
#include "util/statusor.h"

namespace tower {

struct ContextOptions {
  // Where this process sits in a job: its logical devices are named
  // /job:<job>/replica:<replica>/task:<task>/device:<TYPE>:<id>.
  std::string job = kLocalJob;
  int replica = 0;
  int task = 0;
};

// TensorFlow's message texts, for callers and tests that match on them.
inline constexpr char kVisibleDevicesInitializedError[] =
    "Visible devices cannot be modified after being initialized";
inline constexpr char kPhysicalDevicesInitializedError[] =
    "Physical devices cannot be modified after being initialized";
inline constexpr char kVirtualDevicesInitializedError[] =
    "Virtual devices cannot be modified after being initialized";
inline constexpr char kMemoryGrowthDiffersError[] =
    "Memory growth cannot differ between GPU devices";
inline constexpr char kIntraOpInitializedError[] =
    "Intra op parallelism cannot be modified after initialization.";
inline constexpr char kInterOpInitializedError[] =
    "Inter op parallelism cannot be modified after initialization.";

// Memory held back from a card when growth is off and no limit is set, so that the CUDA
// context, cuBLAS workspaces and other processes still fit: max(256 MiB, 5% of the card).
uint64_t GpuMemoryReserveBytes(uint64_t total_bytes);

class Context {
 public:
  // The process-wide context over the CPU platform and this build's GPU platform.
  static Context& Global();
  // The context that ops without inputs use on this thread: the innermost
  // ScopedDefaultContext's, else Global().
  static Context& Default();

  // `platforms` must hold exactly one CPU platform, and at most one of each other type.
  explicit Context(std::vector<std::unique_ptr<Platform>> platforms,
                   ContextOptions options = ContextOptions());
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // ---- Physical devices and configuration -----------------------------------------------
  // All physical devices of a type ("CPU", "GPU"), or of every type for "".
  std::vector<PhysicalDevice> ListPhysicalDevices(std::string_view device_type = "") const;
  // Model, UUID, PCI bus id, memory, compute capability.
  StatusOr<PhysicalDeviceInfo> GetDeviceDetails(const PhysicalDevice& device) const;
  // Memory free right now on a physical device (creates a GPU's CUDA context).
  StatusOr<MemoryInfo> QueryMemoryInfo(const PhysicalDevice& device) const;
  // The platform of a type, or nullptr.
  Platform* GetPlatform(std::string_view device_type) const;

  // Makes exactly `devices` visible among those of `device_type` ("" = every type); an
  // empty list with "GPU" hides every GPU. The CPU cannot be hidden.
  Status SetVisibleDevices(const std::vector<PhysicalDevice>& devices,
                           std::string_view device_type = "");
  std::vector<PhysicalDevice> GetVisibleDevices(std::string_view device_type = "") const;

  // GPUs only. All visible GPUs must end up with the same setting (checked when the
  // runtime initialises). TF_FORCE_GPU_ALLOW_GROWTH, when set, overrides it.
  Status SetMemoryGrowth(const PhysicalDevice& device, bool enable);
  // The setting that will apply: the environment's, else the device's, else true.
  StatusOr<bool> GetMemoryGrowth(const PhysicalDevice& device) const;

  // Splits a physical device (GPU or CPU) into one logical device per configuration;
  // an empty list restores the default of one logical device.
  Status SetLogicalDeviceConfiguration(const PhysicalDevice& device,
                                       const std::vector<LogicalDeviceConfiguration>& configs);
  StatusOr<std::vector<LogicalDeviceConfiguration>> GetLogicalDeviceConfiguration(
      const PhysicalDevice& device) const;

  // Caps each GPU's logical devices without their own limit at `fraction` of the card
  // (TensorFlow 1's per_process_gpu_memory_fraction). 0 < fraction <= 1.
  Status SetPerProcessMemoryFraction(double fraction);
  std::optional<double> GetPerProcessMemoryFraction() const;

  // Placement switches; these may change at any time.
  void SetSoftDevicePlacement(bool enable) { soft_placement_.store(enable); }
  bool GetSoftDevicePlacement() const { return soft_placement_.load(); }
  void SetLogDevicePlacement(bool enable) { log_placement_.store(enable); }
  bool GetLogDevicePlacement() const { return log_placement_.load(); }

  // Threads, as TensorFlow's tf.config.threading (0, the default: the system picks; a
  // negative count is InvalidArgument; after initialisation a different value is
  // FailedPrecondition with TensorFlow's text, the same value succeeds).
  //   intra-op: how many threads one CPU kernel call may use (0: one per usable core;
  //     device/intra_op.h resolves it and bounds it per replica);
  //   inter-op: how many OS threads run CPU replicas concurrently (0: one per usable core;
  //     ResolvedInterOpThreads in device/intra_op.h).
  Status SetIntraOpParallelismThreads(int num_threads);
  int GetIntraOpParallelismThreads() const { return intra_op_threads_.load(); }
  Status SetInterOpParallelismThreads(int num_threads);
  int GetInterOpParallelismThreads() const { return inter_op_threads_.load(); }

  // ---- Runtime --------------------------------------------------------------------------
  // Creates the logical devices if not done yet. On failure nothing is kept, the context
  // stays unconfigured-but-editable, and the error says what to change.
  Status EnsureInitialized();
  bool IsInitialized() const;

  // Initialises. Logical devices of a type (or all), in id order, CPUs first.
  StatusOr<std::vector<LogicalDevice>> ListLogicalDevices(std::string_view device_type = "");
  StatusOr<std::vector<Device*>> Devices(std::string_view device_type = "");

  // The logical device a name or spec denotes ("/GPU:1", "/job:localhost/.../CPU:0"; ""
  // or a spec without device = the default device: first GPU, else CPU:0). An unknown
  // device is NotFound("/job:localhost/replica:0/task:0/device:GPU:2 unknown device ..."),
  // unless soft placement is on: then the first device of the same type, else CPU:0.
  StatusOr<Device*> FindDevice(std::string_view spec);
  // `*exact`, when given, says whether the device is the one `spec` names (not soft
  // placement's fallback): such an answer holds for as long as this context lives, since
  // its devices and names are fixed once it is initialised.
  StatusOr<Device*> FindDevice(const DeviceName& spec, bool* exact = nullptr);
  // Unique among this process's contexts, never reused (unlike an address): keys what
  // callers remember about this context (DeviceScope's resolved device).
  uint64_t id() const { return id_; }
  // The device ops go to when nothing asks for one: the first GPU, else CPU:0.
  StatusOr<Device*> DefaultDevice();

  // Allocator statistics of a logical device (TensorFlow's get_memory_info), and reset
  // of its peak (reset_memory_stats).
  StatusOr<AllocatorStats> GetMemoryStats(std::string_view device);
  Status ResetMemoryStats(std::string_view device);

  const ContextOptions& options() const { return options_; }
  // Names this process's devices /job:<job>/replica:0/task:<task>/... (a worker of a
  // multi-process job). Only before initialisation, like the other settings.
  Status SetJobAndTask(std::string job, int task);
  // Fills a spec's missing job/replica/task with this process's: "/GPU:2" ->
  // "/job:localhost/replica:0/task:0/device:GPU:2".
  DeviceName Canonicalize(const DeviceName& spec) const;

 private:
  struct PhysicalEntry {
    Platform* platform;
    const PhysicalDeviceInfo* info;
  };
  StatusOr<PhysicalEntry> LookUpLocked(const PhysicalDevice& device) const;
  bool IsVisibleLocked(const std::string& name) const;
  StatusOr<bool> EffectiveGrowthLocked(const std::string& name) const;
  Status InitializeLocked();
  Status CreateLogicalDevicesLocked(Platform* platform, const PhysicalDeviceInfo& info,
                                    bool growth, int* next_id,
                                    std::vector<std::unique_ptr<Device>>* out);
  Status RefuseAfterInit(const char* message) const;
  Status SetThreads(std::atomic<int>& setting, int num_threads, const char* what,
                    const char* initialized_error);
  StatusOr<Device*> FindDeviceImpl(const DeviceName& spec, bool soft, bool* exact = nullptr);

  const uint64_t id_;
  const std::vector<std::unique_ptr<Platform>> platforms_;
  ContextOptions options_;  // fixed once initialised
  std::atomic<bool> soft_placement_{false};
  std::atomic<bool> log_placement_{false};
  // Read by every CPU kernel call (atomics: no lock there); written under mu_.
  std::atomic<int> intra_op_threads_{0};
  std::atomic<int> inter_op_threads_{0};

  mutable std::mutex mu_;
  // Configuration, keyed by physical device name.
  std::optional<std::vector<std::string>> visible_;  // unset: all visible
  std::map<std::string, bool> memory_growth_;
  std::map<std::string, std::vector<LogicalDeviceConfiguration>> logical_configs_;
  std::optional<double> memory_fraction_;
  // Runtime, set once by InitializeLocked.
  std::atomic<bool> initialized_{false};
  std::vector<std::unique_ptr<Device>> devices_;
};

// Makes `context` this thread's Context::Default() while alive (tests over fake devices,
// programs that run their own Context). Nests; destroy in reverse order.
class ScopedDefaultContext {
 public:
  explicit ScopedDefaultContext(Context& context);
  ~ScopedDefaultContext();
  ScopedDefaultContext(const ScopedDefaultContext&) = delete;
  ScopedDefaultContext& operator=(const ScopedDefaultContext&) = delete;

 private:
  Context* previous_;
};

// Reads TF_FORCE_GPU_ALLOW_GROWTH: unset -> nullopt; "true"/"false" (any case) -> the
// value; anything else -> InvalidArgument naming the value.
StatusOr<std::optional<bool>> ForceGpuAllowGrowthFromEnv();

}  // namespace tower

#endif  // TOWER_DEVICE_CONTEXT_H_
