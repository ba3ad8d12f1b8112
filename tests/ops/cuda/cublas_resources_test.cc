// Each logical GPU owns its cuBLAS handle and workspace: made on the first MatMul, the
// workspace taken from the device's own allocator (so it counts against the logical device's
// memory limit, not behind its back), and both released when the device goes away. The
// workspace's place is seen on a card too (real cuBLAS); the handles' lifetime and cuBLAS's
// internal workspace through the emulation's counts, so that case runs only under it.
#include <gtest/gtest.h>

#include "device/context.h"
#include "device/cpu_platform.h"
#include "device/gpu_platform.h"
#include "ops/math_ops.h"
#include "tests/testing/emulation.h"
#include "tests/testing/gpu.h"

#ifdef CUDAEMU
#include <cudaemu/cublas_testing.h>
#endif

namespace tower {
namespace {

// nullptr without a GPU.
std::unique_ptr<Context> TwoVirtualGpus() {
  std::vector<std::unique_ptr<Platform>> platforms;
  platforms.push_back(CreateCpuPlatform());
  platforms.push_back(CreateGpuPlatform());
  auto context = std::make_unique<Context>(std::move(platforms));
  const std::vector<PhysicalDevice> gpus = context->ListPhysicalDevices("GPU");
  if (gpus.empty()) return nullptr;
  TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
      gpus[0], {LogicalDeviceConfiguration{256}, LogicalDeviceConfiguration{256}}));
  TOWER_CHECK_OK(context->EnsureInitialized());
  return context;
}

void MatMulOn(Device* gpu) {
  StatusOr<Tensor> a = Tensor::FromHost(gpu, Shape{2, 2}, {1, 2, 3, 4});
  ASSERT_TRUE(a.ok()) << a.status();
  StatusOr<Tensor> product = ops::MatMul(*a, *a);
  ASSERT_TRUE(product.ok()) << product.status();
  StatusOr<std::vector<float>> values = product->ToHost();
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<float>{7, 10, 15, 22}));
}

TEST(CublasResourcesTest, EachDeviceTakesItsWorkspaceFromItsOwnAllocator) {
  std::unique_ptr<Context> context = TwoVirtualGpus();
  if (context == nullptr) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
  for (const char* name : {"/GPU:0", "/GPU:1"}) {
    Device* gpu = *context->FindDevice(name);
    const uint64_t in_use_before = gpu->allocator().GetStats().bytes_in_use;
    MatMulOn(gpu);
    // The operands are freed again; what stays is the workspace: cuBLAS's default size, 4 MiB
    // (32 MiB from Hopper on).
    EXPECT_GE(gpu->allocator().GetStats().bytes_in_use - in_use_before, uint64_t{4} << 20)
        << name;
  }
}

TEST(CublasResourcesTest, EachDeviceOwnsItsHandleAndWorkspace) {
#ifdef CUDAEMU
  const int64_t handles_before = cudaemu::testing::CublasLiveHandles();
  {
    std::unique_ptr<Context> context = TwoVirtualGpus();
    ASSERT_NE(context, nullptr);
    Device* v0 = *context->FindDevice("/GPU:0");
    Device* v1 = *context->FindDevice("/GPU:1");
    const uint64_t in_use_before = v0->allocator().GetStats().bytes_in_use;
    MatMulOn(v0);
    MatMulOn(v1);
    EXPECT_EQ(cudaemu::testing::CublasLiveHandles(), handles_before + 2);
    // The workspace comes from the logical device's allocator, not from cuBLAS itself.
    EXPECT_EQ(cudaemu::testing::CublasInternalWorkspaceBytes(0), 0u);
    EXPECT_GT(v0->allocator().GetStats().bytes_in_use, in_use_before);
  }
  EXPECT_EQ(cudaemu::testing::CublasLiveHandles(), handles_before)
      << "cuBLAS handles outlived their devices";
#else
  TOWER_SKIP_NEEDS_EMULATION("counts of live cuBLAS handles and of cuBLAS-internal "
                             "workspace (cudaemu::testing::CublasLiveHandles, "
                             "CublasInternalWorkspaceBytes)");
#endif
}

}  // namespace
}  // namespace tower
