// CUDAEMU_NO_DRIVER=1: a machine whose driver is older than the runtime. CUDA reports
// cudaErrorInsufficientDriver from every call that needs the driver, and zero devices.
#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

namespace {

TEST(NoDriverTest, EveryCallSaysTheDriverIsInsufficient) {
  int count = 7;
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaErrorInsufficientDriver);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInsufficientDriver);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  void* ptr = nullptr;
  EXPECT_EQ(cudaMalloc(&ptr, 16), cudaErrorInsufficientDriver);
  EXPECT_EQ(cudaSetDevice(0), cudaErrorInsufficientDriver);
  int version = -1;
  EXPECT_EQ(cudaDriverGetVersion(&version), cudaSuccess);
  EXPECT_EQ(version, 0);
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInsufficientDriver),
               "CUDA driver version is insufficient for CUDA runtime version");
}

}  // namespace
