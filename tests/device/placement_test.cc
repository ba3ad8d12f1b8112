#include "device/placement.h"

#include <algorithm>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/testing/fake_gpu_platform.h"
#include "util/logging.h"
#include "util/strings.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::FakeGpuSpec;
using testing::MakeContextWithFakeGpus;

// Kernels by device type, as a registry would report them.
class TypeKernels : public KernelSupport {
 public:
  explicit TypeKernels(std::vector<std::string> types) : types_(std::move(types)) {}
  bool HasKernelFor(const Device& device) const override {
    return std::find(types_.begin(), types_.end(), device.device_type()) != types_.end();
  }
  std::string DescribeKernels() const override { return Join(types_, ", "); }

 private:
  std::vector<std::string> types_;
};

const TypeKernels kCpuAndGpu({"CPU", "GPU"});
const TypeKernels kCpuOnly({"CPU"});
const TypeKernels kGpuOnly({"GPU"});
const TypeKernels kNone({});

// Initialised up front, so that log captures see placement lines only.
std::unique_ptr<Context> OneGpu() {
  auto context = MakeContextWithFakeGpus({FakeGpuSpec()});
  TOWER_CHECK_OK(context->EnsureInitialized());
  return context;
}

std::string Place(Context& context, const KernelSupport& kernels,
                  Device* input = nullptr) {
  StatusOr<Device*> device = PlaceOp(context, "MatMul", kernels, input);
  return device.ok() ? (*device)->short_name() : device.status().ToString();
}

TEST(DeviceScopeTest, NestsAndMerges) {
  EXPECT_EQ(DeviceScope::Current()->ToString(), "");
  {
    DeviceScope outer("/job:localhost");
    EXPECT_EQ(DeviceScope::Current()->ToString(), "/job:localhost");
    {
      DeviceScope inner("/GPU:1");
      EXPECT_EQ(DeviceScope::Current()->ToString(), "/job:localhost/device:GPU:1");
      {
        DeviceScope innermost("/cpu:0");
        EXPECT_EQ(DeviceScope::Current()->ToString(), "/job:localhost/device:CPU:0");
      }
      EXPECT_EQ(DeviceScope::Current()->ToString(), "/job:localhost/device:GPU:1");
    }
  }
  EXPECT_EQ(DeviceScope::Current()->ToString(), "");
}

TEST(DeviceScopeTest, MalformedScopeFailsOpsUnderItWithTheParseError) {
  auto context = OneGpu();
  DeviceScope scope("/device:GPU:one");
  EXPECT_TRUE(IsInvalidArgument(scope.status()));
  StatusOr<Device*> device = PlaceOp(*context, "MatMul", kCpuAndGpu, nullptr);
  EXPECT_TRUE(IsInvalidArgument(device.status()));
  EXPECT_THAT(device.status().message(), HasSubstr("'/device:GPU:one'"));
}

TEST(DeviceScopeTest, ScopesAreThreadLocal) {
  DeviceScope scope("/CPU:0");
  std::string other_thread;
  std::thread([&] { other_thread = DeviceScope::Current()->ToString(); }).join();
  EXPECT_EQ(other_thread, "");
  EXPECT_EQ(DeviceScope::Current()->ToString(), "/device:CPU:0");
}

TEST(PlaceOpTest, DefaultIsFirstGpuElseCpu) {
  auto context = OneGpu();
  EXPECT_EQ(Place(*context, kCpuAndGpu), "GPU:0");
  auto cpu_only = MakeContextWithFakeGpus({});
  EXPECT_EQ(Place(*cpu_only, kCpuAndGpu), "CPU:0");
}

TEST(PlaceOpTest, ScopeWinsOverInputsAndDefault) {
  auto context = OneGpu();
  Device* gpu = *context->FindDevice("/GPU:0");
  DeviceScope scope("/CPU:0");
  EXPECT_EQ(Place(*context, kCpuAndGpu, gpu), "CPU:0");
}

TEST(PlaceOpTest, GpuInputsStayOnTheirGpu) {
  auto context = MakeContextWithFakeGpus({FakeGpuSpec(), FakeGpuSpec()});
  Device* gpu1 = *context->FindDevice("/GPU:1");
  EXPECT_EQ(Place(*context, kCpuAndGpu, gpu1), "GPU:1");
}

TEST(PlaceOpTest, CpuInputsGoToTheGpuAsInTensorFlow) {
  // TensorFlow's guide example: a and b on CPU:0, MatMul without a scope runs on GPU:0.
  auto context = OneGpu();
  Device* cpu = *context->FindDevice("/CPU:0");
  EXPECT_EQ(Place(*context, kCpuAndGpu, cpu), "GPU:0");
}

TEST(PlaceOpTest, WithoutGpuOpsStayOnTheInputsLogicalCpu) {
  auto context = MakeContextWithFakeGpus({});
  ASSERT_TRUE(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0],
      {LogicalDeviceConfiguration{}, LogicalDeviceConfiguration{}}).ok());
  Device* cpu1 = *context->FindDevice("/CPU:1");
  EXPECT_EQ(Place(*context, kCpuAndGpu, cpu1), "CPU:1");
  EXPECT_EQ(Place(*context, kCpuAndGpu), "CPU:0");
}

TEST(PlaceOpTest, CpuOnlyKernelFallsBackToCpuEvenWhenGpuIsAskedFor) {
  auto context = OneGpu();
  context->SetLogDevicePlacement(true);
  ScopedLogCapture capture;
  {
    DeviceScope scope("/GPU:0");
    StatusOr<Device*> device = PlaceOp(*context, "Cast", kCpuOnly, nullptr);
    ASSERT_TRUE(device.ok());
    EXPECT_TRUE((*device)->is_cpu());
  }
  EXPECT_EQ(capture.text(),
            "Executing op Cast in device /job:localhost/replica:0/task:0/device:CPU:0\n");
}

TEST(PlaceOpTest, FallbackStaysOnTheInputsLogicalCpu) {
  auto context = MakeContextWithFakeGpus({FakeGpuSpec()});
  ASSERT_TRUE(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0],
      {LogicalDeviceConfiguration{}, LogicalDeviceConfiguration{}}).ok());
  Device* cpu1 = *context->FindDevice("/CPU:1");
  DeviceScope scope("/GPU:0");
  StatusOr<Device*> device = PlaceOp(*context, "Cast", kCpuOnly, cpu1);
  ASSERT_TRUE(device.ok());
  EXPECT_EQ(*device, cpu1);
}

TEST(PlaceOpTest, UnknownDeviceIsNotFoundAndSoftPlacementFallsBack) {
  auto context = OneGpu();
  DeviceScope scope("/GPU:2");
  StatusOr<Device*> missing = PlaceOp(*context, "MatMul", kCpuAndGpu, nullptr);
  EXPECT_TRUE(IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(),
              StartsWith("/job:localhost/replica:0/task:0/device:GPU:2 unknown device"));
  context->SetSoftDevicePlacement(true);
  EXPECT_EQ(Place(*context, kCpuAndGpu), "GPU:0");
}

// A scope remembers the device it resolved to, per context: the same scope over another
// context (even one made where a destroyed one was) finds that context's own device.
TEST(PlaceOpTest, AScopeFindsEachContextsOwnDevice) {
  auto a = MakeContextWithFakeGpus({FakeGpuSpec(), FakeGpuSpec()});
  auto b = MakeContextWithFakeGpus({FakeGpuSpec(), FakeGpuSpec()});
  const Device* a_gpu1 = *a->FindDevice("/GPU:1");
  const Device* b_gpu1 = *b->FindDevice("/GPU:1");
  ASSERT_NE(a_gpu1, b_gpu1);
  DeviceScope scope("/GPU:1");
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(*PlaceOp(*a, "MatMul", kCpuAndGpu, nullptr), a_gpu1);
    EXPECT_EQ(*PlaceOp(*b, "MatMul", kCpuAndGpu, nullptr), b_gpu1);
  }
  a.reset();
  auto c = MakeContextWithFakeGpus({FakeGpuSpec(), FakeGpuSpec()});
  EXPECT_EQ(*PlaceOp(*c, "MatMul", kCpuAndGpu, nullptr), *c->FindDevice("/GPU:1"));
}

// Soft placement's fallback is not remembered: turned off, the same scope is NotFound again.
TEST(PlaceOpTest, SoftPlacementsFallbackIsNotRemembered) {
  auto context = OneGpu();
  DeviceScope scope("/GPU:2");
  context->SetSoftDevicePlacement(true);
  EXPECT_EQ(Place(*context, kCpuAndGpu), "GPU:0");
  EXPECT_EQ(Place(*context, kCpuAndGpu), "GPU:0");
  context->SetSoftDevicePlacement(false);
  EXPECT_TRUE(IsNotFound(PlaceOp(*context, "MatMul", kCpuAndGpu, nullptr).status()));
}

// Each scope remembers its own device: an inner one's does not outlive it.
TEST(PlaceOpTest, NestedScopesEachPlaceOnTheirOwnDevice) {
  auto context = MakeContextWithFakeGpus({FakeGpuSpec(), FakeGpuSpec()});
  DeviceScope outer("/GPU:1");
  EXPECT_EQ(Place(*context, kCpuAndGpu), "GPU:1");
  {
    DeviceScope inner("/CPU:0");
    EXPECT_EQ(Place(*context, kCpuAndGpu), "CPU:0");
    EXPECT_EQ(Place(*context, kCpuAndGpu), "CPU:0");
  }
  EXPECT_EQ(Place(*context, kCpuAndGpu), "GPU:1");
  {
    DeviceScope inner("/GPU:0");
    EXPECT_EQ(Place(*context, kCpuAndGpu), "GPU:0");
  }
  EXPECT_EQ(Place(*context, kCpuAndGpu), "GPU:1");
}

TEST(PlaceOpTest, OpWithoutAnyUsableKernel) {
  auto context = OneGpu();
  DeviceScope scope("/CPU:0");
  StatusOr<Device*> none = PlaceOp(*context, "Fancy", kGpuOnly, nullptr);
  EXPECT_TRUE(IsNotFound(none.status()));
  EXPECT_THAT(none.status().message(), HasSubstr("Op Fancy has no kernel for CPU"));
  EXPECT_THAT(none.status().message(), HasSubstr("it has kernels for: GPU"));
  EXPECT_TRUE(IsNotFound(PlaceOp(*context, "Nothing", kNone, nullptr).status()));
}

TEST(PlaceOpTest, PlacementLogLinesHaveTensorFlowsExactForm) {
  auto context = OneGpu();
  ScopedLogCapture capture;
  EXPECT_EQ(Place(*context, kCpuAndGpu), "GPU:0");
  EXPECT_EQ(capture.text(), "");  // off by default
  context->SetLogDevicePlacement(true);
  EXPECT_EQ(Place(*context, kCpuAndGpu), "GPU:0");
  {
    DeviceScope scope("/CPU:0");
    EXPECT_EQ(Place(*context, kCpuAndGpu), "CPU:0");
  }
  EXPECT_EQ(capture.text(),
            "Executing op MatMul in device /job:localhost/replica:0/task:0/device:GPU:0\n"
            "Executing op MatMul in device /job:localhost/replica:0/task:0/device:CPU:0\n");
}

}  // namespace
}  // namespace tower
