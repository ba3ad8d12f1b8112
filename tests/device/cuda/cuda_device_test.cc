// The CUDA platform on a real GPU: properties, memory policies as seen by the driver
// (cudaMemGetInfo), virtual GPUs on one card, and that allocator memory is device memory.
// Skips on machines without a GPU (it is built only with --config=cuda).
#include <cuda_runtime_api.h>

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/context.h"
#include "device/cpu_platform.h"
#include "device/gpu_platform.h"
#include "tests/testing/gpu.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kMiB = 1ull << 20;

std::unique_ptr<Context> RealContext() {
  std::vector<std::unique_ptr<Platform>> platforms;
  platforms.push_back(CreateCpuPlatform());
  platforms.push_back(CreateGpuPlatform());
  return std::make_unique<Context>(std::move(platforms));
}

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(GpuPlatformCompiledIn());
    context_ = RealContext();
    if (context_->ListPhysicalDevices("GPU").empty()) {
      TOWER_SKIP_WITHOUT_GPU(context_->GetPlatform("GPU")->status());
    }
  }
  uint64_t FreeBytes(int gpu) {
    return context_->QueryMemoryInfo(context_->ListPhysicalDevices("GPU")[gpu])->free_bytes;
  }
  std::unique_ptr<Context> context_;
};

TEST(CudaPlatformTest, NoGpuMeansZeroGpusWithTheReason) {
  auto context = RealContext();
  Platform* gpu = context->GetPlatform("GPU");
  if (!gpu->devices().empty()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_THAT(gpu->status().message(), StartsWith("no usable GPU"));
  EXPECT_THAT(gpu->version(), HasSubstr("CUDA runtime 13."));
  EXPECT_TRUE(context->ListLogicalDevices("GPU")->empty());
}

TEST_F(CudaDeviceTest, PhysicalDevicePropertiesAreFilledIn) {
  for (const PhysicalDevice& device : context_->ListPhysicalDevices("GPU")) {
    StatusOr<PhysicalDeviceInfo> info = context_->GetDeviceDetails(device);
    ASSERT_TRUE(info.ok());
    EXPECT_THAT(info->uuid, StartsWith("GPU-"));
    EXPECT_EQ(info->uuid.size(), 40u);
    EXPECT_EQ(info->pci_bus_id.size(), 12u);
    EXPECT_GT(info->total_memory_bytes, 1024 * kMiB);
    EXPECT_GE(info->compute_capability_major, 7);
    EXPECT_GT(info->cores, 0);
    EXPECT_FALSE(info->model.empty());
  }
}

TEST_F(CudaDeviceTest, GrowthTakesMemoryOnlyWhenAskedAndMemoryIsUsable) {
  StatusOr<Device*> gpu = context_->FindDevice("/GPU:0");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_TRUE((*gpu)->memory_growth());
  EXPECT_EQ((*gpu)->allocator().GetStats().bytes_reserved, 0u);
  const uint64_t before = FreeBytes(0);
  StatusOr<void*> buffer = (*gpu)->allocator().Allocate(256 * kMiB);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_LE(FreeBytes(0) + 256 * kMiB, before + 8 * kMiB);  // the driver sees it taken
  // It is device memory: fill it on the device and read it back.
  ASSERT_EQ(cudaMemset(*buffer, 0x5a, 1024), cudaSuccess);
  std::vector<unsigned char> host(1024);
  ASSERT_EQ(cudaMemcpy(host.data(), *buffer, 1024, cudaMemcpyDeviceToHost), cudaSuccess);
  for (unsigned char byte : host) ASSERT_EQ(byte, 0x5a);
  (*gpu)->allocator().Deallocate(*buffer);
}

TEST_F(CudaDeviceTest, PreallocationTakesTheLimitAtInitialization) {
  const PhysicalDevice gpu0 = context_->ListPhysicalDevices("GPU")[0];
  for (const PhysicalDevice& gpu : context_->ListPhysicalDevices("GPU")) {
    ASSERT_TRUE(context_->SetMemoryGrowth(gpu, false).ok());
  }
  ASSERT_TRUE(context_->SetLogicalDeviceConfiguration(gpu0, {LogicalDeviceConfiguration{1024}}).ok());
  ASSERT_TRUE(context_->SetVisibleDevices({gpu0}, "GPU").ok());
  const uint64_t before = FreeBytes(0);
  ASSERT_TRUE(context_->EnsureInitialized().ok());
  Device* device = *context_->FindDevice("/GPU:0");
  EXPECT_EQ(device->allocator().GetStats().bytes_reserved, 1024 * kMiB);
  EXPECT_GE(before - FreeBytes(0), 1024 * kMiB);
}

TEST_F(CudaDeviceTest, VirtualGpusShareTheCardAndKeepTheirLimits) {
  const PhysicalDevice gpu0 = context_->ListPhysicalDevices("GPU")[0];
  ASSERT_TRUE(context_->SetLogicalDeviceConfiguration(
      gpu0, {LogicalDeviceConfiguration{512}, LogicalDeviceConfiguration{512}}).ok());
  Device* v0 = *context_->FindDevice("/GPU:0");
  Device* v1 = *context_->FindDevice("/GPU:1");
  EXPECT_TRUE(v0->SharesPhysicalDeviceWith(*v1));
  StatusOr<void*> a = v0->allocator().Allocate(400 * kMiB);
  ASSERT_TRUE(a.ok());
  StatusOr<void*> b = v0->allocator().Allocate(200 * kMiB);
  EXPECT_TRUE(IsResourceExhausted(b.status()));
  EXPECT_THAT(b.status().message(), HasSubstr("device:GPU:0"));
  StatusOr<void*> c = v1->allocator().Allocate(200 * kMiB);
  EXPECT_TRUE(c.ok());
  v0->allocator().Deallocate(*a);
  v1->allocator().Deallocate(*c);
}

}  // namespace
}  // namespace tower
