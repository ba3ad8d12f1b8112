// Primary contexts as CUDA 12+ creates them: not by reading the device count, properties or
// the current device; by cudaSetDevice at once; by the first call that needs one on a thread
// that never chose a device (device 0). And the driver's current-context query
// (cuCtxGetCurrent, through cudaGetDriverEntryPointByVersion) says whether a thread has one.
#include <cuda_runtime_api.h>

#include <thread>

#include <gtest/gtest.h>

#include "cudaemu/testing.h"

namespace {

using CtxGetCurrent = int (*)(void**);

void* CurrentContext() {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult status;
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &function, 12000,
                                             cudaEnableDefault, &status),
            cudaSuccess);
  EXPECT_EQ(status, cudaDriverEntryPointSuccess);
  void* context = reinterpret_cast<void*>(1);
  EXPECT_EQ(reinterpret_cast<CtxGetCurrent>(function)(&context), 0);
  return context;
}

TEST(ContextTest, CreatedOnlyWhereCudaCreatesThem) {
  using cudaemu::testing::PrimaryContextsCreated;
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  ASSERT_EQ(count, 2);
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 1), cudaSuccess);
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 0);  // the default, without a context
  EXPECT_EQ(CurrentContext(), nullptr);
  EXPECT_EQ(PrimaryContextsCreated(0), 0);
  EXPECT_EQ(PrimaryContextsCreated(1), 0);

  // cudaSetDevice creates the context at once, on that device only.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_EQ(PrimaryContextsCreated(1), 1);
  EXPECT_EQ(PrimaryContextsCreated(0), 0);
  EXPECT_NE(CurrentContext(), nullptr);
  void* ptr = nullptr;
  ASSERT_EQ(cudaMalloc(&ptr, 64), cudaSuccess);
  ASSERT_EQ(cudaFree(ptr), cudaSuccess);
  EXPECT_EQ(PrimaryContextsCreated(1), 1);  // one context per device and process
  EXPECT_EQ(PrimaryContextsCreated(0), 0);

  // A thread that never chose a device gets device 0's context from its first real call.
  std::thread([] {
    EXPECT_EQ(CurrentContext(), nullptr);
    void* p = nullptr;
    ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
    EXPECT_NE(CurrentContext(), nullptr);
    ASSERT_EQ(cudaFree(p), cudaSuccess);
  }).join();
  EXPECT_EQ(PrimaryContextsCreated(0), 1);
}

}  // namespace
