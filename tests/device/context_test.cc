// The configuration → runtime life cycle of a Context, on the real CPU platform and fake
// GPUs (device/testing/fake_gpu_platform.h), so every GPU configuration path runs here.
#include "device/context.h"

#include <cstdlib>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/cpu_platform.h"
#include "device/gpu_platform.h"
#include "device/testing/fake_gpu_platform.h"

namespace tower {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::FakeGpuPlatform;
using testing::FakeGpuSpec;
using testing::MakeContextWithFakeGpus;

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

std::vector<std::string> Names(const std::vector<LogicalDevice>& devices) {
  std::vector<std::string> names;
  for (const auto& d : devices) names.push_back(d.name);
  return names;
}

std::unique_ptr<Context> TwoGpus(uint64_t total = 4 * kGiB, uint64_t free = 0) {
  return MakeContextWithFakeGpus({FakeGpuSpec{"Fake A", total, free, ""},
                                  FakeGpuSpec{"Fake B", total, free, ""}});
}

FakeGpuPlatform& Fake(Context& context) {
  return *static_cast<FakeGpuPlatform*>(context.GetPlatform("GPU"));
}

// Sets an environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old) old_ = old;
    had_ = old != nullptr;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(ContextTest, ListsPhysicalDevicesCpuFirst) {
  auto context = TwoGpus();
  std::vector<PhysicalDevice> all = context->ListPhysicalDevices();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].ToString(), "PhysicalDevice(name='/physical_device:CPU:0', device_type='CPU')");
  EXPECT_EQ(all[1].ToString(), "PhysicalDevice(name='/physical_device:GPU:0', device_type='GPU')");
  EXPECT_EQ(all[2].name, "/physical_device:GPU:1");
  EXPECT_EQ(context->ListPhysicalDevices("GPU").size(), 2u);
  EXPECT_EQ(context->ListPhysicalDevices("gpu").size(), 2u);
  EXPECT_EQ(context->ListPhysicalDevices("CPU").size(), 1u);
  EXPECT_TRUE(context->ListPhysicalDevices("TPU").empty());
  EXPECT_FALSE(context->IsInitialized());  // listing physical devices does not initialise
}

TEST(ContextTest, DeviceDetails) {
  auto context = TwoGpus();
  StatusOr<PhysicalDeviceInfo> gpu = context->GetDeviceDetails(context->ListPhysicalDevices("GPU")[1]);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(gpu->model, "Fake B");
  EXPECT_EQ(gpu->uuid, "GPU-fake-1");
  EXPECT_EQ(gpu->total_memory_bytes, 4 * kGiB);
  EXPECT_EQ(gpu->compute_capability_major, 9);
  StatusOr<PhysicalDeviceInfo> cpu = context->GetDeviceDetails(context->ListPhysicalDevices("CPU")[0]);
  ASSERT_TRUE(cpu.ok());
  EXPECT_GT(cpu->cores, 0);
  EXPECT_GT(cpu->total_memory_bytes, 0u);
  StatusOr<PhysicalDeviceInfo> bad = context->GetDeviceDetails(PhysicalDevice{"/physical_device:GPU:7", "GPU"});
  EXPECT_TRUE(IsInvalidArgument(bad.status()));
  EXPECT_THAT(bad.status().message(), HasSubstr("Unrecognized device"));
}

TEST(ContextTest, DefaultIsOneLogicalDevicePerPhysicalDevice) {
  auto context = TwoGpus();
  StatusOr<std::vector<LogicalDevice>> devices = context->ListLogicalDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_THAT(Names(*devices), ElementsAre("/job:localhost/replica:0/task:0/device:CPU:0",
                                           "/job:localhost/replica:0/task:0/device:GPU:0",
                                           "/job:localhost/replica:0/task:0/device:GPU:1"));
  EXPECT_EQ((*devices)[1].ToString(),
            "LogicalDevice(name='/job:localhost/replica:0/task:0/device:GPU:0', "
            "device_type='GPU')");
  EXPECT_TRUE(context->IsInitialized());
  // Default policy: grow on demand, so nothing is taken from the cards yet.
  EXPECT_EQ(Fake(*context).bytes_taken(0), 0u);
  EXPECT_EQ(Fake(*context).bytes_taken(1), 0u);
  auto gpus = context->Devices("GPU");
  ASSERT_TRUE(gpus.ok());
  EXPECT_TRUE((*gpus)[0]->memory_growth());
  EXPECT_EQ((*gpus)[0]->memory_limit_bytes(), 4 * kGiB);
  EXPECT_FALSE((*gpus)[0]->SharesPhysicalDeviceWith(*(*gpus)[1]));
}

TEST(ContextTest, VisibleDevicesRestrictGpus) {
  auto context = TwoGpus();
  std::vector<PhysicalDevice> gpus = context->ListPhysicalDevices("GPU");
  ASSERT_TRUE(context->SetVisibleDevices({gpus[1]}, "GPU").ok());
  EXPECT_EQ(context->GetVisibleDevices("GPU"), std::vector<PhysicalDevice>{gpus[1]});
  EXPECT_EQ(context->GetVisibleDevices().size(), 2u);  // CPU stays
  StatusOr<std::vector<LogicalDevice>> logical = context->ListLogicalDevices("GPU");
  ASSERT_TRUE(logical.ok());
  // The remaining GPU is renumbered from 0, and lives on physical GPU 1.
  EXPECT_THAT(Names(*logical), ElementsAre("/job:localhost/replica:0/task:0/device:GPU:0"));
  EXPECT_EQ((*context->Devices("GPU"))[0]->physical().model, "Fake B");
}

TEST(ContextTest, EmptyVisibleListHidesEveryGpu) {
  auto context = TwoGpus();
  ASSERT_TRUE(context->SetVisibleDevices({}, "GPU").ok());
  StatusOr<std::vector<LogicalDevice>> logical = context->ListLogicalDevices();
  ASSERT_TRUE(logical.ok());
  EXPECT_THAT(Names(*logical), ElementsAre("/job:localhost/replica:0/task:0/device:CPU:0"));
  StatusOr<Device*> fallback = context->DefaultDevice();
  ASSERT_TRUE(fallback.ok());
  EXPECT_TRUE((*fallback)->is_cpu());
}

TEST(ContextTest, VisibleDevicesRejectsBadInput) {
  auto context = TwoGpus();
  const std::vector<PhysicalDevice> gpus = context->ListPhysicalDevices("GPU");
  const PhysicalDevice cpu = context->ListPhysicalDevices("CPU")[0];
  Status hide_cpu = context->SetVisibleDevices({gpus[0]});
  EXPECT_TRUE(IsInvalidArgument(hide_cpu));
  EXPECT_THAT(hide_cpu.message(), HasSubstr("The CPU cannot be hidden"));
  Status wrong_type = context->SetVisibleDevices({cpu}, "GPU");
  EXPECT_TRUE(IsInvalidArgument(wrong_type));
  EXPECT_THAT(wrong_type.message(), HasSubstr("is not of type GPU"));
  Status unknown = context->SetVisibleDevices({PhysicalDevice{"/physical_device:GPU:9", "GPU"}}, "GPU");
  EXPECT_TRUE(IsInvalidArgument(unknown));
  EXPECT_THAT(unknown.message(), HasSubstr("Unrecognized device: PhysicalDevice(name='/physical_device:GPU:9'"));
  Status bad_type = context->SetVisibleDevices({}, "TPU");
  EXPECT_THAT(bad_type.message(), HasSubstr("Unknown device type 'TPU'"));
  // Both types at once is fine when the CPU is in the list.
  EXPECT_TRUE(context->SetVisibleDevices({cpu, gpus[0]}).ok());
  EXPECT_EQ(context->GetVisibleDevices("GPU").size(), 1u);
}

TEST(ContextTest, SettersAfterInitializationFailWithTensorFlowsTexts) {
  auto context = TwoGpus();
  const std::vector<PhysicalDevice> gpus = context->ListPhysicalDevices("GPU");
  ASSERT_TRUE(context->EnsureInitialized().ok());

  Status visible = context->SetVisibleDevices({gpus[0]}, "GPU");
  EXPECT_TRUE(IsFailedPrecondition(visible));
  EXPECT_THAT(visible.message(), StartsWith("Visible devices cannot be modified after being initialized"));

  Status growth = context->SetMemoryGrowth(gpus[0], false);
  EXPECT_TRUE(IsFailedPrecondition(growth));
  EXPECT_THAT(growth.message(), StartsWith("Physical devices cannot be modified after being initialized"));

  Status virtual_devices = context->SetLogicalDeviceConfiguration(
      gpus[0], {LogicalDeviceConfiguration{1024}, LogicalDeviceConfiguration{1024}});
  EXPECT_TRUE(IsFailedPrecondition(virtual_devices));
  EXPECT_THAT(virtual_devices.message(), StartsWith("Virtual devices cannot be modified after being initialized"));

  Status fraction = context->SetPerProcessMemoryFraction(0.5);
  EXPECT_TRUE(IsFailedPrecondition(fraction));
  EXPECT_THAT(fraction.message(), StartsWith("Physical devices cannot be modified after being initialized"));

  // As in TensorFlow, a call that changes nothing still succeeds after initialisation.
  EXPECT_TRUE(context->SetVisibleDevices(gpus, "GPU").ok());
  EXPECT_TRUE(context->SetMemoryGrowth(gpus[0], true).ok());
  EXPECT_TRUE(context->SetLogicalDeviceConfiguration(gpus[0], {}).ok());
  // Placement switches are not device configuration: they change at any time.
  context->SetSoftDevicePlacement(true);
  EXPECT_TRUE(context->GetSoftDevicePlacement());
}

// tf.config.threading's rules: 0 (the system picks) by default, negative counts refused,
// any value before initialisation, after it the same value only.
TEST(ContextTest, ThreadSettingsFollowTensorFlowsRules) {
  auto context = TwoGpus();
  EXPECT_EQ(context->GetIntraOpParallelismThreads(), 0);
  EXPECT_EQ(context->GetInterOpParallelismThreads(), 0);
  Status negative = context->SetIntraOpParallelismThreads(-1);
  EXPECT_TRUE(IsInvalidArgument(negative));
  EXPECT_THAT(negative.message(), HasSubstr("got -1"));
  EXPECT_TRUE(IsInvalidArgument(context->SetInterOpParallelismThreads(-3)));
  EXPECT_EQ(context->GetIntraOpParallelismThreads(), 0);

  ASSERT_TRUE(context->SetIntraOpParallelismThreads(4).ok());
  ASSERT_TRUE(context->SetIntraOpParallelismThreads(2).ok());  // changeable until initialised
  ASSERT_TRUE(context->SetInterOpParallelismThreads(3).ok());
  ASSERT_TRUE(context->EnsureInitialized().ok());

  Status intra = context->SetIntraOpParallelismThreads(1);
  EXPECT_TRUE(IsFailedPrecondition(intra));
  EXPECT_THAT(intra.message(),
              StartsWith("Intra op parallelism cannot be modified after initialization."));
  Status inter = context->SetInterOpParallelismThreads(0);
  EXPECT_TRUE(IsFailedPrecondition(inter));
  EXPECT_THAT(inter.message(),
              StartsWith("Inter op parallelism cannot be modified after initialization."));
  EXPECT_TRUE(IsInvalidArgument(context->SetIntraOpParallelismThreads(-1)));
  // The same value again changes nothing: accepted, as in TensorFlow.
  EXPECT_TRUE(context->SetIntraOpParallelismThreads(2).ok());
  EXPECT_TRUE(context->SetInterOpParallelismThreads(3).ok());
  EXPECT_EQ(context->GetIntraOpParallelismThreads(), 2);
  EXPECT_EQ(context->GetInterOpParallelismThreads(), 3);
}

TEST(ContextTest, MemoryGrowthIsForGpusOnly) {
  auto context = TwoGpus();
  Status cpu = context->SetMemoryGrowth(context->ListPhysicalDevices("CPU")[0], true);
  EXPECT_TRUE(IsInvalidArgument(cpu));
  EXPECT_THAT(cpu.message(), HasSubstr("memory growth applies to GPUs"));
}

TEST(ContextTest, MemoryGrowthThatDiffersBetweenGpusIsRefusedAndCanBeFixed) {
  auto context = TwoGpus();
  const std::vector<PhysicalDevice> gpus = context->ListPhysicalDevices("GPU");
  ASSERT_TRUE(context->SetMemoryGrowth(gpus[0], true).ok());
  ASSERT_TRUE(context->SetMemoryGrowth(gpus[1], false).ok());
  EXPECT_EQ(*context->GetMemoryGrowth(gpus[1]), false);
  Status init = context->EnsureInitialized();
  EXPECT_TRUE(IsInvalidArgument(init));
  EXPECT_THAT(init.message(), StartsWith("Memory growth cannot differ between GPU devices"));
  EXPECT_THAT(init.message(), HasSubstr("on for /physical_device:GPU:0 and off for /physical_device:GPU:1"));
  EXPECT_FALSE(context->IsInitialized());
  EXPECT_FALSE(context->ListLogicalDevices().ok());
  // Nothing was created, and the configuration can still be fixed.
  EXPECT_EQ(Fake(*context).bytes_taken(0), 0u);
  ASSERT_TRUE(context->SetMemoryGrowth(gpus[1], true).ok());
  EXPECT_TRUE(context->EnsureInitialized().ok());
}

TEST(ContextTest, MemoryGrowthOfHiddenGpuDoesNotMatter) {
  auto context = TwoGpus();
  const std::vector<PhysicalDevice> gpus = context->ListPhysicalDevices("GPU");
  ASSERT_TRUE(context->SetMemoryGrowth(gpus[1], false).ok());
  ASSERT_TRUE(context->SetVisibleDevices({gpus[0]}, "GPU").ok());
  EXPECT_TRUE(context->EnsureInitialized().ok());
}

TEST(ContextTest, VirtualGpusOnOneCard) {
  auto context = TwoGpus();
  const std::vector<PhysicalDevice> gpus = context->ListPhysicalDevices("GPU");
  ASSERT_TRUE(context
                  ->SetLogicalDeviceConfiguration(
                      gpus[0], {LogicalDeviceConfiguration{1024}, LogicalDeviceConfiguration{1024}})
                  .ok());
  StatusOr<std::vector<LogicalDeviceConfiguration>> configs =
      context->GetLogicalDeviceConfiguration(gpus[0]);
  ASSERT_TRUE(configs.ok());
  EXPECT_EQ(configs->size(), 2u);
  EXPECT_TRUE(context->GetLogicalDeviceConfiguration(gpus[1])->empty());

  StatusOr<std::vector<Device*>> logical = context->Devices("GPU");
  ASSERT_TRUE(logical.ok());
  ASSERT_EQ(logical->size(), 3u);  // 2 on card 0, 1 on card 1
  Device* v0 = (*logical)[0];
  Device* v1 = (*logical)[1];
  Device* other = (*logical)[2];
  EXPECT_EQ(v0->full_name(), "/job:localhost/replica:0/task:0/device:GPU:0");
  EXPECT_EQ(v1->full_name(), "/job:localhost/replica:0/task:0/device:GPU:1");
  EXPECT_EQ(other->full_name(), "/job:localhost/replica:0/task:0/device:GPU:2");
  EXPECT_TRUE(v0->SharesPhysicalDeviceWith(*v1));
  EXPECT_FALSE(v0->SharesPhysicalDeviceWith(*other));
  EXPECT_EQ(v0->memory_limit_bytes(), 1024 * kMiB);
  EXPECT_EQ(other->memory_limit_bytes(), 4 * kGiB);
  // Each virtual GPU enforces its own limit (growth is on: nothing is taken yet).
  EXPECT_EQ(Fake(*context).bytes_taken(0), 0u);
  StatusOr<void*> a = v0->allocator().Allocate(800 * kMiB);
  ASSERT_TRUE(a.ok()) << a.status();
  StatusOr<void*> b = v0->allocator().Allocate(300 * kMiB);
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(IsResourceExhausted(b.status()));
  EXPECT_THAT(b.status().message(), HasSubstr("/job:localhost/replica:0/task:0/device:GPU:0"));
  StatusOr<void*> c = v1->allocator().Allocate(300 * kMiB);
  EXPECT_TRUE(c.ok()) << c.status();
  v0->allocator().Deallocate(*a);
  v1->allocator().Deallocate(*c);
}

TEST(ContextTest, LogicalConfigurationValidation) {
  auto context = TwoGpus(/*total=*/4 * kGiB);
  const PhysicalDevice gpu = context->ListPhysicalDevices("GPU")[0];
  Status negative = context->SetLogicalDeviceConfiguration(gpu, {LogicalDeviceConfiguration{-5}});
  EXPECT_TRUE(IsInvalidArgument(negative));
  EXPECT_THAT(negative.message(), HasSubstr("memory_limit_mb of logical device 0 on /physical_device:GPU:0 is -5"));
  Status zero = context->SetLogicalDeviceConfiguration(gpu, {LogicalDeviceConfiguration{1024}, LogicalDeviceConfiguration{0}});
  EXPECT_THAT(zero.message(), HasSubstr("logical device 1"));
  Status too_much = context->SetLogicalDeviceConfiguration(
      gpu, {LogicalDeviceConfiguration{3000}, LogicalDeviceConfiguration{3000}});
  EXPECT_TRUE(IsInvalidArgument(too_much));
  EXPECT_THAT(too_much.message(), HasSubstr("add up to 6000 MiB, more than its 4096 MiB"));
  Status unknown = context->SetLogicalDeviceConfiguration(PhysicalDevice{"/physical_device:GPU:5", "GPU"}, {});
  EXPECT_THAT(unknown.message(), HasSubstr("Unrecognized device"));
  // Nothing invalid was kept.
  EXPECT_TRUE(context->GetLogicalDeviceConfiguration(gpu)->empty());
}

TEST(ContextTest, GrowthOffPreallocatesTheLimit) {
  auto context = TwoGpus();
  const std::vector<PhysicalDevice> gpus = context->ListPhysicalDevices("GPU");
  for (const auto& gpu : gpus) ASSERT_TRUE(context->SetMemoryGrowth(gpu, false).ok());
  ASSERT_TRUE(context->SetLogicalDeviceConfiguration(gpus[0], {LogicalDeviceConfiguration{512}}).ok());
  ASSERT_TRUE(context->EnsureInitialized().ok());
  // Card 0: exactly the 512 MiB limit. Card 1 (no limit): free memory less the reserve,
  // max(256 MiB, 5%) = 256 MiB of 4 GiB.
  EXPECT_EQ(Fake(*context).bytes_taken(0), 512 * kMiB);
  EXPECT_EQ(Fake(*context).bytes_taken(1), 4 * kGiB - 256 * kMiB);
  Device* gpu0 = (*context->Devices("GPU"))[0];
  EXPECT_FALSE(gpu0->memory_growth());
  EXPECT_EQ(gpu0->allocator().GetStats().bytes_reserved, 512 * kMiB);
}

TEST(ContextTest, GrowthOffFailsCleanlyWhenTheCardIsTooFull) {
  // 4 GiB cards with only 1 GiB free (another process holds the rest).
  auto context = TwoGpus(4 * kGiB, 1 * kGiB);
  const std::vector<PhysicalDevice> gpus = context->ListPhysicalDevices("GPU");
  for (const auto& gpu : gpus) ASSERT_TRUE(context->SetMemoryGrowth(gpu, false).ok());
  ASSERT_TRUE(context->SetLogicalDeviceConfiguration(
      gpus[0], {LogicalDeviceConfiguration{768}, LogicalDeviceConfiguration{768}}).ok());
  Status init = context->EnsureInitialized();
  EXPECT_TRUE(IsResourceExhausted(init)) << init;
  EXPECT_THAT(init.message(), HasSubstr("Could not initialize the devices of /physical_device:GPU:0"));
  EXPECT_THAT(init.message(), HasSubstr("could not reserve 768 MiB"));
  EXPECT_FALSE(context->IsInitialized());
  // Everything taken during the failed attempt was given back.
  EXPECT_EQ(Fake(*context).bytes_taken(0), 0u);
  EXPECT_EQ(Fake(*context).bytes_taken(1), 0u);
  // Growth on: the same layout initialises (each may grow to 768 MiB).
  for (const auto& gpu : gpus) ASSERT_TRUE(context->SetMemoryGrowth(gpu, true).ok());
  EXPECT_TRUE(context->EnsureInitialized().ok());
}

TEST(ContextTest, PerProcessMemoryFraction) {
  auto context = TwoGpus(4 * kGiB);
  EXPECT_FALSE(context->GetPerProcessMemoryFraction().has_value());
  for (double bad : {0.0, -0.1, 1.5, std::nan("")}) {
    Status status = context->SetPerProcessMemoryFraction(bad);
    EXPECT_TRUE(IsInvalidArgument(status)) << bad;
    EXPECT_THAT(status.message(), HasSubstr("must be in (0, 1]"));
  }
  ASSERT_TRUE(context->SetPerProcessMemoryFraction(0.4).ok());
  const PhysicalDevice gpu1 = context->ListPhysicalDevices("GPU")[1];
  // An explicit limit wins over the fraction.
  ASSERT_TRUE(context->SetLogicalDeviceConfiguration(gpu1, {LogicalDeviceConfiguration{100}}).ok());
  StatusOr<std::vector<Device*>> gpus = context->Devices("GPU");
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ((*gpus)[0]->memory_limit_bytes(), static_cast<uint64_t>(0.4 * 4 * kGiB));
  EXPECT_EQ((*gpus)[1]->memory_limit_bytes(), 100 * kMiB);
}

TEST(ContextTest, FractionWithGrowthOffPreallocatesTheFraction) {
  auto context = TwoGpus(4 * kGiB);
  for (const auto& gpu : context->ListPhysicalDevices("GPU")) {
    ASSERT_TRUE(context->SetMemoryGrowth(gpu, false).ok());
  }
  ASSERT_TRUE(context->SetPerProcessMemoryFraction(0.5).ok());
  ASSERT_TRUE(context->EnsureInitialized().ok());
  EXPECT_EQ(Fake(*context).bytes_taken(0), 2 * kGiB);
}

TEST(ContextTest, UnlimitedVirtualGpusShareTheRestEvenly) {
  auto context = TwoGpus(4 * kGiB);
  const PhysicalDevice gpu0 = context->ListPhysicalDevices("GPU")[0];
  ASSERT_TRUE(context->SetLogicalDeviceConfiguration(
      gpu0, {LogicalDeviceConfiguration{1024}, LogicalDeviceConfiguration{},
             LogicalDeviceConfiguration{}}).ok());
  StatusOr<std::vector<Device*>> gpus = context->Devices("GPU");
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ((*gpus)[0]->memory_limit_bytes(), 1 * kGiB);
  EXPECT_EQ((*gpus)[1]->memory_limit_bytes(), 1536 * kMiB);
  EXPECT_EQ((*gpus)[2]->memory_limit_bytes(), 1536 * kMiB);
}

TEST(ContextTest, LogicalCpusWithLimits) {
  auto context = MakeContextWithFakeGpus({});
  const PhysicalDevice cpu = context->ListPhysicalDevices("CPU")[0];
  ASSERT_TRUE(context->SetLogicalDeviceConfiguration(
      cpu, {LogicalDeviceConfiguration{}, LogicalDeviceConfiguration{},
            LogicalDeviceConfiguration{64}, LogicalDeviceConfiguration{}}).ok());
  StatusOr<std::vector<LogicalDevice>> logical = context->ListLogicalDevices("CPU");
  ASSERT_TRUE(logical.ok());
  EXPECT_THAT(Names(*logical), ElementsAre("/job:localhost/replica:0/task:0/device:CPU:0",
                                           "/job:localhost/replica:0/task:0/device:CPU:1",
                                           "/job:localhost/replica:0/task:0/device:CPU:2",
                                           "/job:localhost/replica:0/task:0/device:CPU:3"));
  StatusOr<Device*> cpu2 = context->FindDevice("/CPU:2");
  ASSERT_TRUE(cpu2.ok());
  EXPECT_TRUE((*cpu2)->memory_growth());
  EXPECT_EQ((*cpu2)->memory_limit_bytes(), 64 * kMiB);
  StatusOr<void*> over = (*cpu2)->allocator().Allocate(65 * kMiB);
  EXPECT_TRUE(IsResourceExhausted(over.status()));
  EXPECT_THAT(over.status().message(),
              HasSubstr("on /job:localhost/replica:0/task:0/device:CPU:2: memory limit 64.0 MiB"));
  StatusOr<void*> fits = (*cpu2)->allocator().Allocate(60 * kMiB);
  ASSERT_TRUE(fits.ok());
  (*cpu2)->allocator().Deallocate(*fits);
  EXPECT_TRUE((*context->FindDevice("/CPU:0"))->SharesPhysicalDeviceWith(**cpu2));
}

TEST(ContextTest, ForceGpuAllowGrowthEnvOverridesTheSetting) {
  ScopedEnv env("TF_FORCE_GPU_ALLOW_GROWTH", "true");
  auto context = TwoGpus();
  const std::vector<PhysicalDevice> gpus = context->ListPhysicalDevices("GPU");
  ASSERT_TRUE(context->SetMemoryGrowth(gpus[1], false).ok());
  EXPECT_EQ(*context->GetMemoryGrowth(gpus[1]), true);
  ASSERT_TRUE(context->EnsureInitialized().ok());  // no "cannot differ": env forces both
  EXPECT_EQ(Fake(*context).bytes_taken(1), 0u);
}

TEST(ContextTest, ForceGpuAllowGrowthFalsePreallocates) {
  ScopedEnv env("TF_FORCE_GPU_ALLOW_GROWTH", "FALSE");
  auto context = TwoGpus();
  ASSERT_TRUE(context->SetLogicalDeviceConfiguration(context->ListPhysicalDevices("GPU")[0],
                                                     {LogicalDeviceConfiguration{256}}).ok());
  ASSERT_TRUE(context->EnsureInitialized().ok());
  EXPECT_EQ(Fake(*context).bytes_taken(0), 256 * kMiB);
}

TEST(ContextTest, ForceGpuAllowGrowthRejectsOtherValues) {
  ScopedEnv env("TF_FORCE_GPU_ALLOW_GROWTH", "yes");
  auto context = TwoGpus();
  Status init = context->EnsureInitialized();
  EXPECT_TRUE(IsInvalidArgument(init));
  EXPECT_THAT(init.message(), HasSubstr("TF_FORCE_GPU_ALLOW_GROWTH='yes' is not a valid value"));
  EXPECT_FALSE(context->GetMemoryGrowth(context->ListPhysicalDevices("GPU")[0]).ok());
}

TEST(ContextTest, FindDeviceByAnyForm) {
  auto context = TwoGpus();
  for (const char* spec : {"/GPU:1", "/gpu:1", "/device:GPU:1", "GPU:1",
                           "/job:localhost/replica:0/task:0/device:GPU:1",
                           "/job:localhost/device:GPU:1"}) {
    StatusOr<Device*> device = context->FindDevice(spec);
    ASSERT_TRUE(device.ok()) << spec << ": " << device.status();
    EXPECT_EQ((*device)->full_name(), "/job:localhost/replica:0/task:0/device:GPU:1") << spec;
  }
  // No device component: the default device (first GPU).
  EXPECT_EQ((*context->FindDevice(""))->short_name(), "GPU:0");
  EXPECT_EQ((*context->FindDevice("/job:localhost"))->short_name(), "GPU:0");
}

TEST(ContextTest, UnknownDeviceIsNotFoundUnlessSoftPlacement) {
  auto context = TwoGpus();
  StatusOr<Device*> missing = context->FindDevice("/GPU:2");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(),
              StartsWith("/job:localhost/replica:0/task:0/device:GPU:2 unknown device"));
  EXPECT_THAT(missing.status().message(), HasSubstr("SetSoftDevicePlacement(true)"));
  EXPECT_TRUE(IsNotFound(context->FindDevice("/job:worker/device:CPU:0").status()));
  EXPECT_TRUE(IsNotFound(context->FindDevice("/device:TPU:0").status()));

  context->SetSoftDevicePlacement(true);
  EXPECT_EQ((*context->FindDevice("/GPU:2"))->short_name(), "GPU:0");
  EXPECT_EQ((*context->FindDevice("/device:TPU:0"))->short_name(), "CPU:0");
  EXPECT_EQ((*context->FindDevice("/CPU:5"))->short_name(), "CPU:0");
}

TEST(ContextTest, FindDeviceRejectsPhysicalAndMalformedNames) {
  auto context = TwoGpus();
  StatusOr<Device*> physical = context->FindDevice("/physical_device:GPU:0");
  EXPECT_TRUE(IsInvalidArgument(physical.status()));
  EXPECT_THAT(physical.status().message(), HasSubstr("names a physical device"));
  StatusOr<Device*> malformed = context->FindDevice("/device:GPU:zero");
  EXPECT_TRUE(IsInvalidArgument(malformed.status()));
  EXPECT_THAT(malformed.status().message(), HasSubstr("/device:GPU:zero"));
}

TEST(ContextTest, TaskNamesComeFromOptions) {
  ContextOptions options;
  options.job = "worker";
  options.task = 3;
  auto context = MakeContextWithFakeGpus({}, options);
  StatusOr<std::vector<LogicalDevice>> devices = context->ListLogicalDevices();
  ASSERT_TRUE(devices.ok());
  EXPECT_THAT(Names(*devices), ElementsAre("/job:worker/replica:0/task:3/device:CPU:0"));
  EXPECT_TRUE(context->FindDevice("/CPU:0").ok());
  StatusOr<Device*> other = context->FindDevice("/job:worker/task:1/device:CPU:0");
  EXPECT_THAT(other.status().message(), StartsWith("/job:worker/replica:0/task:1/device:CPU:0 unknown device"));
}

TEST(ContextTest, MemoryStatsAndReset) {
  auto context = MakeContextWithFakeGpus({});
  StatusOr<Device*> cpu = context->FindDevice("/CPU:0");
  ASSERT_TRUE(cpu.ok());
  StatusOr<void*> a = (*cpu)->allocator().Allocate(3 * kMiB);
  StatusOr<void*> b = (*cpu)->allocator().Allocate(1 * kMiB);
  ASSERT_TRUE(a.ok() && b.ok());
  (*cpu)->allocator().Deallocate(*a);
  StatusOr<AllocatorStats> stats = context->GetMemoryStats("/CPU:0");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bytes_in_use, 1 * kMiB);
  EXPECT_EQ(stats->peak_bytes_in_use, 4 * kMiB);
  ASSERT_TRUE(context->ResetMemoryStats("/device:CPU:0").ok());
  EXPECT_EQ(context->GetMemoryStats("/CPU:0")->peak_bytes_in_use, 1 * kMiB);
  // Statistics name exactly one device: soft placement never redirects them.
  context->SetSoftDevicePlacement(true);
  EXPECT_TRUE(IsNotFound(context->GetMemoryStats("/GPU:0").status()));
  EXPECT_TRUE(IsNotFound(context->ResetMemoryStats("/CPU:9")));
  (*cpu)->allocator().Deallocate(*b);
}

TEST(ContextTest, ConcurrentInitializationCreatesDevicesOnce) {
  auto context = TwoGpus();
  std::vector<std::thread> threads;
  std::vector<Device*> seen(8, nullptr);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      StatusOr<Device*> device = context->FindDevice("/GPU:1");
      if (device.ok()) seen[t] = *device;
    });
  }
  for (auto& thread : threads) thread.join();
  for (Device* device : seen) EXPECT_EQ(device, seen[0]);
  EXPECT_NE(seen[0], nullptr);
  EXPECT_EQ(context->ListLogicalDevices()->size(), 3u);
}

TEST(ContextTest, ABuildWithoutUsableGpuListsZeroGpusAndSaysWhy) {
  std::vector<std::unique_ptr<Platform>> platforms;
  platforms.push_back(CreateCpuPlatform());
  platforms.push_back(CreateGpuPlatform());  // stub, or CUDA on a machine without a GPU
  Context context(std::move(platforms));
  Platform* gpu = context.GetPlatform("GPU");
  ASSERT_NE(gpu, nullptr);
  if (!gpu->devices().empty()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_TRUE(context.ListPhysicalDevices("GPU").empty());
  EXPECT_FALSE(gpu->status().ok());
  EXPECT_THAT(gpu->status().message(),
              GpuPlatformCompiledIn() ? HasSubstr("no usable GPU") : HasSubstr("--config=cuda"));
  StatusOr<std::vector<LogicalDevice>> logical = context.ListLogicalDevices("GPU");
  ASSERT_TRUE(logical.ok()) << logical.status();
  EXPECT_TRUE(logical->empty());
  EXPECT_TRUE((*context.DefaultDevice())->is_cpu());
}

}  // namespace
}  // namespace tower
