// A process that uses only GPU 1 creates no CUDA context on GPU 0. Under mpirun each worker
// typically drives one GPU of a shared machine: a stray context on GPU 0 takes hundreds of MiB
// there for every worker, and fails outright when GPU 0 is in EXCLUSIVE_PROCESS mode. Since
// CUDA 12, cudaSetDevice(0) creates that context, so restoring "the previous device" of a
// thread that never chose one is enough to cause it. Checked through the emulation's count
// of primary contexts, or on a machine with 2 cards through the driver's own answer
// (cuDevicePrimaryCtxGetState); one test per binary (contexts are per process).
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "device/context.h"
#include "device/cpu_platform.h"
#include "device/gpu_platform.h"
#include "ops/math_ops.h"
#include "tests/testing/emulation.h"
#include "tests/testing/gpu.h"

#ifdef CUDAEMU
#include <cudaemu/testing.h>
#else
#include <dlfcn.h>
#endif

namespace tower {
namespace {

#ifdef CUDAEMU
// The primary contexts the process created on `device`.
StatusOr<int> PrimaryContexts(int device) {
  return cudaemu::testing::PrimaryContextsCreated(device);
}
#else
// Whether `device`'s primary context is active (1) or not (0), as the driver's API says. The
// runtime's API has no such question; the driver's library is opened here rather than linked,
// so that a machine without a driver still loads the test (and skips it).
StatusOr<int> PrimaryContexts(int device) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) return InternalError(std::string("dlopen libcuda.so.1: ") + dlerror());
  using CuInit = int (*)(unsigned);
  using CuDeviceGet = int (*)(int*, int);
  using CuPrimaryCtxGetState = int (*)(int, unsigned*, int*);
  auto init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"));
  auto get = reinterpret_cast<CuDeviceGet>(dlsym(driver, "cuDeviceGet"));
  auto state = reinterpret_cast<CuPrimaryCtxGetState>(dlsym(driver, "cuDevicePrimaryCtxGetState"));
  if (init == nullptr || get == nullptr || state == nullptr) {
    return InternalError("libcuda.so.1 lacks cuInit, cuDeviceGet or cuDevicePrimaryCtxGetState");
  }
  int handle = 0;
  unsigned flags = 0;
  int active = 0;
  int result = init(0);
  if (result == 0) result = get(&handle, device);
  if (result == 0) result = state(handle, &flags, &active);
  if (result != 0) {
    return InternalError("the driver's API failed for device " + std::to_string(device) +
                         ": CUresult " + std::to_string(result));
  }
  return active;
}
#endif

TEST(OneGpuProcessTest, UsingOnlyGpu1CreatesNoContextOnGpu0) {
  std::vector<std::unique_ptr<Platform>> platforms;
  platforms.push_back(CreateCpuPlatform());
  platforms.push_back(CreateGpuPlatform());
  Context context(std::move(platforms));
  const std::vector<PhysicalDevice> gpus = context.ListPhysicalDevices("GPU");
  if (gpus.empty()) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
  if (gpus.size() < 2) GTEST_SKIP() << "needs 2 cards; this machine has " << gpus.size();
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
  const StatusOr<int> on1 = PrimaryContexts(1);
  const StatusOr<int> on0 = PrimaryContexts(0);
  ASSERT_TRUE(on1.ok()) << on1.status();
  ASSERT_TRUE(on0.ok()) << on0.status();
  EXPECT_EQ(*on1, 1);
  EXPECT_EQ(*on0, 0) << "a context was created on GPU 0, which this process never uses";
}

}  // namespace
}  // namespace tower
