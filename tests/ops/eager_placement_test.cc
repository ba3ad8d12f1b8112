// Placement through real ops on a machine with (fake) GPUs: TensorFlow's guide examples, copies
// between devices, the CPU fallback of Cast, unknown devices and soft placement, with the
// placement log captured line by line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/placement.h"
#include "device/testing/fake_gpu_platform.h"
#include "ops/array_ops.h"
#include "ops/kernel_registry.h"
#include "ops/math_ops.h"
#include "ops/testing/fake_gpu_kernels.h"
#include "ops/training_ops.h"
#include "util/logging.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::FakeGpuSpec;
using testing::MakeContextWithFakeGpus;

constexpr char kCpu0[] = "/job:localhost/replica:0/task:0/device:CPU:0";
constexpr char kGpu0[] = "/job:localhost/replica:0/task:0/device:GPU:0";

class EagerPlacementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::RegisterFakeGpuKernels();
    // Two cards; the first split into two virtual GPUs: GPU:0 and GPU:1 share card 0.
    context_ = MakeContextWithFakeGpus({FakeGpuSpec(), FakeGpuSpec()});
    TOWER_CHECK_OK(context_->SetLogicalDeviceConfiguration(
        context_->ListPhysicalDevices("GPU")[0],
        {LogicalDeviceConfiguration{256}, LogicalDeviceConfiguration{256}}));
    TOWER_CHECK_OK(context_->EnsureInitialized());
    use_ = std::make_unique<ScopedDefaultContext>(*context_);
  }
  void TearDown() override { use_.reset(); }

  Device* Find(const char* name) { return *context_->FindDevice(name); }

  std::unique_ptr<Context> context_;
  std::unique_ptr<ScopedDefaultContext> use_;
};

const std::vector<float> kA = {1, 2, 3, 4, 5, 6};
const std::vector<float> kB = {1, 2, 3, 4, 5, 6};

TEST_F(EagerPlacementTest, SeedsFirstExampleRunsOnTheGpu) {
  context_->SetLogDevicePlacement(true);
  ScopedLogCapture capture;
  Tensor a = *ops::Constant(kA, Shape{2, 3});
  Tensor b = *ops::Constant(kB, Shape{3, 2});
  StatusOr<Tensor> c = ops::MatMul(a, b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(capture.text(), std::string("Executing op _EagerConst in device ") + kGpu0 + "\n" +
                                "Executing op _EagerConst in device " + kGpu0 + "\n" +
                                "Executing op MatMul in device " + kGpu0 + "\n");
  EXPECT_EQ(c->DebugString(),
            "tower.Tensor(\n[[22. 28.]\n [49. 64.]], shape=(2, 2), dtype=float32)");
}

TEST_F(EagerPlacementTest, SeedsManualPlacementCopiesCpuInputsToTheGpu) {
  context_->SetLogDevicePlacement(true);
  ScopedLogCapture capture;
  Tensor a, b;
  {
    DeviceScope scope("/CPU:0");
    a = *ops::Constant(kA, Shape{2, 3});
    b = *ops::Constant(kB, Shape{3, 2});
  }
  EXPECT_EQ(a.device()->full_name(), kCpu0);
  const uint64_t gpu_before = Find("/GPU:0")->allocator().GetStats().num_allocs;
  StatusOr<Tensor> c = ops::MatMul(a, b);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->device()->full_name(), kGpu0);
  // Both inputs were copied to the GPU (two copies and the output allocated there).
  EXPECT_EQ(Find("/GPU:0")->allocator().GetStats().num_allocs, gpu_before + 3);
  EXPECT_EQ(capture.text(), std::string("Executing op _EagerConst in device ") + kCpu0 + "\n" +
                                "Executing op _EagerConst in device " + kCpu0 + "\n" +
                                "Executing op MatMul in device " + kGpu0 + "\n");
  EXPECT_EQ(*c->ToHost(), (std::vector<float>{22, 28, 49, 64}));
}

// The logical CPUs share host memory: a kernel on CPU:1 reads CPU:0's inputs in place (what
// replicas sharing their variables rely on), and allocates only its output there.
TEST(EagerCpuToCpuTest, ACpuKernelReadsAnotherCpusInputsInPlace) {
  auto context = MakeContextWithFakeGpus({});
  TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0], std::vector<LogicalDeviceConfiguration>(2)));
  TOWER_CHECK_OK(context->EnsureInitialized());
  ScopedDefaultContext use(*context);
  Device* cpu0 = *context->FindDevice("/CPU:0");
  Device* cpu1 = *context->FindDevice("/CPU:1");
  const Tensor a = *ops::Constant(kA, Shape{2, 3}, cpu0);
  const Tensor b = *ops::Constant(kB, Shape{3, 2}, cpu0);
  const uint64_t cpu0_before = cpu0->allocator().GetStats().num_allocs;
  const uint64_t cpu1_before = cpu1->allocator().GetStats().num_allocs;
  DeviceScope scope("/CPU:1");
  StatusOr<Tensor> c = ops::MatMul(a, b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->device(), cpu1);
  EXPECT_EQ(cpu1->allocator().GetStats().num_allocs, cpu1_before + 1) << "only the output";
  EXPECT_EQ(cpu0->allocator().GetStats().num_allocs, cpu0_before);
  EXPECT_EQ(*c->ToHost(), (std::vector<float>{22, 28, 49, 64}));
}

TEST_F(EagerPlacementTest, CastRunsOnTheCpuEvenWhenTheGpuIsAskedFor) {
  context_->SetLogDevicePlacement(true);
  Tensor x = *ops::Constant({1.5f, -2.5f}, Shape{2}, Find("/GPU:0"));
  ScopedLogCapture capture;
  DeviceScope scope("/GPU:0");
  StatusOr<Tensor> y = ops::Cast(x, DType::kInt32);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->device()->full_name(), kCpu0);
  EXPECT_EQ(capture.text(), std::string("Executing op Cast in device ") + kCpu0 + "\n");
  EXPECT_EQ(*y->ToHostInt32(), (std::vector<int32_t>{1, -2}));
  // Ops with a GPU kernel under the same scope stay on the GPU.
  EXPECT_EQ(ops::Scale(x, 2)->device()->full_name(), kGpu0);
}

TEST_F(EagerPlacementTest, UnknownDeviceIsNotFoundUnlessSoftPlacement) {
  DeviceScope scope("/device:GPU:7");
  StatusOr<Tensor> a = ops::Constant(kA, Shape{2, 3});
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(IsNotFound(a.status()));
  EXPECT_THAT(a.status().message(),
              StartsWith("/job:localhost/replica:0/task:0/device:GPU:7 unknown device"));
  context_->SetSoftDevicePlacement(true);
  StatusOr<Tensor> soft = ops::Constant(kA, Shape{2, 3});
  ASSERT_TRUE(soft.ok());
  EXPECT_EQ(soft->device()->full_name(), kGpu0);
}

TEST_F(EagerPlacementTest, GpuInputsStayOnTheirGpuAndCopiesCrossCards) {
  Device* gpu1 = Find("/GPU:1");  // second virtual GPU on card 0
  Device* gpu2 = Find("/GPU:2");  // card 1
  Tensor x = *ops::Constant(kA, Shape{2, 3}, gpu1);
  StatusOr<Tensor> y = ops::Scale(x, 3);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->device(), gpu1);
  // Virtual GPU -> other card -> CPU, values intact.
  StatusOr<Tensor> on_card1 = y->CopyTo(gpu2);
  ASSERT_TRUE(on_card1.ok());
  StatusOr<Tensor> back = on_card1->CopyTo(Find("/CPU:0"));
  EXPECT_EQ(*back->ToHost(), (std::vector<float>{3, 6, 9, 12, 15, 18}));
  // Mixed inputs: the first input's GPU wins, the other is copied.
  StatusOr<Tensor> sum = ops::Add(*on_card1, *y);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->device(), gpu2);
  EXPECT_EQ(*sum->ToHost(), (std::vector<float>{6, 12, 18, 24, 30, 36}));
}

TEST_F(EagerPlacementTest, InPlaceUpdatesRunWhereTheVariableIs) {
  Device* gpu1 = Find("/GPU:1");
  Tensor var = *ops::Constant({1, 1}, Shape{2}, gpu1);
  const Tensor grad = *ops::Constant({2, 4}, Shape{2}, Find("/CPU:0"));
  DeviceScope scope("/CPU:0");  // the scope does not move a variable update
  ASSERT_TRUE(ops::ApplySgd(var, grad, 0.5f).ok());
  EXPECT_EQ(var.device(), gpu1);
  EXPECT_EQ(*var.ToHost(), (std::vector<float>{0, -1}));
}

TEST_F(EagerPlacementTest, VirtualGpuLimitsApplyToTensors) {
  Device* gpu0 = Find("/GPU:0");  // 256 MiB limit
  StatusOr<Tensor> big = ops::Zeros(Shape{300, 1024, 1024 / 4}, gpu0);  // 300 MiB
  EXPECT_TRUE(IsResourceExhausted(big.status()));
  EXPECT_THAT(big.status().message(), HasSubstr(kGpu0));
  EXPECT_TRUE(ops::Zeros(Shape{200, 1024, 1024 / 4}, gpu0).ok());
}

TEST_F(EagerPlacementTest, InputsFromAnotherContextAreRejected) {
  auto other = MakeContextWithFakeGpus({});
  Tensor mine = *ops::Constant(kA, Shape{6}, Find("/CPU:0"));
  Tensor theirs = *Tensor::FromHost(*other->FindDevice("/CPU:0"), Shape{6}, kA);
  EXPECT_THAT(ops::Add(mine, theirs).status().message(),
              HasSubstr("inputs come from two different Contexts"));
}

Status ProbeKernel(const KernelContext&) { return OkStatus(); }

// A kernel is found for the device type and the platform it was registered for, and for no
// other pair: the lookup compares DeviceKindId numbers, which must keep every pair apart.
TEST_F(EagerPlacementTest, KernelsAreFoundByDeviceTypeAndPlatformTogether) {
  KernelRegistry& registry = KernelRegistry::Global();
  registry.Register("KindProbeFakeGpu", "GPU", "FakeCUDA", &ProbeKernel);
  registry.Register("KindProbeCudaGpu", "GPU", "CUDA", &ProbeKernel);
  registry.Register("KindProbeFakeCpu", "CPU", "FakeCUDA", &ProbeKernel);
  Device* gpu = Find("/GPU:0");
  Device* cpu = Find("/CPU:0");
  ASSERT_EQ(gpu->platform_name(), "FakeCUDA");
  EXPECT_EQ(registry.Op("KindProbeFakeGpu").Find(*gpu), &ProbeKernel);
  EXPECT_EQ(registry.Op("KindProbeFakeGpu").Find(*cpu), nullptr);
  EXPECT_EQ(registry.Op("KindProbeCudaGpu").Find(*gpu), nullptr);  // same type, other platform
  EXPECT_EQ(registry.Op("KindProbeFakeCpu").Find(*gpu), nullptr);  // same platform, other type
  EXPECT_EQ(registry.Op("KindProbeFakeCpu").Find(*cpu), nullptr);
  // Every device of a pair has that pair's number, and the pairs differ.
  EXPECT_EQ(gpu->kind(), DeviceKindId("GPU", "FakeCUDA"));
  EXPECT_EQ(Find("/GPU:2")->kind(), gpu->kind());
  EXPECT_EQ(cpu->kind(), DeviceKindId(cpu->device_type(), cpu->platform_name()));
  EXPECT_NE(gpu->kind(), cpu->kind());
  EXPECT_NE(DeviceKindId("GPU", "CUDA"), gpu->kind());
  EXPECT_NE(DeviceKindId("CPU", "FakeCUDA"), gpu->kind());
}

// A replica's step runs under a scope made from its device (no name to look up): ops land
// on that device, the scope reads as the device's full name, and another context finds its
// own device of that name.
TEST_F(EagerPlacementTest, ADevicesOwnScopePlacesOnIt) {
  Device* gpu1 = Find("/GPU:1");
  auto other = MakeContextWithFakeGpus({FakeGpuSpec(), FakeGpuSpec()});
  TOWER_CHECK_OK(other->EnsureInitialized());
  DeviceScope scope(*gpu1);
  EXPECT_EQ(DeviceScope::Current()->ToString(), gpu1->full_name());
  Tensor on_gpu1 = *ops::Fill(Shape{2}, 1.0f);
  EXPECT_EQ(on_gpu1.device(), gpu1);
  EXPECT_EQ(*DeviceScope::CurrentDevice(*context_), gpu1);
  EXPECT_EQ(*DeviceScope::CurrentDevice(*other), *other->FindDevice(gpu1->full_name()));
  {
    DeviceScope inner("/CPU:0");
    EXPECT_EQ(*DeviceScope::CurrentDevice(*context_), Find("/CPU:0"));
  }
  EXPECT_EQ(*DeviceScope::CurrentDevice(*context_), gpu1);
}

// An outer malformed scope's error wins over a device's scope inside it.
TEST_F(EagerPlacementTest, ADevicesScopeInsideAMalformedOneFailsWithItsError) {
  DeviceScope malformed("/device:GPU:one");
  DeviceScope scope(*Find("/GPU:1"));
  EXPECT_TRUE(IsInvalidArgument(DeviceScope::CurrentDevice(*context_).status()));
}

}  // namespace
}  // namespace tower
