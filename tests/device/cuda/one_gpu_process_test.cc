// A process that uses only GPU 1 creates no CUDA context on GPU 0. Under mpirun each worker
// typically drives one GPU of a shared machine: a stray context on GPU 0 takes hundreds of MiB
// there for every worker, and fails outright when GPU 0 is in EXCLUSIVE_PROCESS mode. Since
// CUDA 12, cudaSetDevice(0) creates that context, so restoring "the previous device" of a
// thread that never chose one is enough to cause it. Checked through the emulation's count
// of primary contexts; one test per binary (contexts are per process).
#include <thread>

#include <gtest/gtest.h>

#include "cudaemu/testing.h"
#include "device/context.h"
#include "device/cpu_platform.h"
#include "device/gpu_platform.h"
#include "ops/math_ops.h"

namespace tower {
namespace {

TEST(OneGpuProcessTest, UsingOnlyGpu1CreatesNoContextOnGpu0) {
  std::vector<std::unique_ptr<Platform>> platforms;
  platforms.push_back(CreateCpuPlatform());
  platforms.push_back(CreateGpuPlatform());
  Context context(std::move(platforms));
  const std::vector<PhysicalDevice> gpus = context.ListPhysicalDevices("GPU");
  ASSERT_EQ(gpus.size(), 2u);
  ASSERT_TRUE(context.SetVisibleDevices({gpus[1]}, "GPU").ok());
  ASSERT_TRUE(context.EnsureInitialized().ok());
  StatusOr<Device*> gpu = context.FindDevice("/GPU:0");  // physical GPU 1
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_EQ((*gpu)->physical().index, 1);
  // From this thread and from a fresh one (a replica thread never chose a device either).
  auto work = [&] {
    StatusOr<Tensor> a = Tensor::FromHost(*gpu, Shape{2, 2}, {1, 2, 3, 4});
    ASSERT_TRUE(a.ok()) << a.status();
    StatusOr<Tensor> product = ops::MatMul(*a, *a);
    ASSERT_TRUE(product.ok()) << product.status();
    StatusOr<Tensor> sum = ops::Add(*product, *a);
    ASSERT_TRUE(sum.ok()) << sum.status();
    StatusOr<std::vector<float>> values = sum->ToHost();
    ASSERT_TRUE(values.ok()) << values.status();
    EXPECT_EQ(*values, (std::vector<float>{8, 12, 18, 26}));
  };
  work();
  std::thread(work).join();
  EXPECT_EQ(cudaemu::testing::PrimaryContextsCreated(1), 1);
  EXPECT_EQ(cudaemu::testing::PrimaryContextsCreated(0), 0)
      << "a context was created on GPU 0, which this process never uses";
}

}  // namespace
}  // namespace tower
