// cuBLAS on a machine whose runtime has no device (CUDAEMU_GPUS=0, set by the BUILD rule):
// cublasCreate fails with CUBLAS_STATUS_NOT_INITIALIZED and creates nothing.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cudaemu/cublas_testing.h"
#include "gtest/gtest.h"

namespace {

TEST(CublasNoDeviceTest, CreateFails) {
  int count = -1;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaErrorNoDevice);
  cublasHandle_t handle = nullptr;
  EXPECT_EQ(cublasCreate(&handle), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cudaemu::testing::CublasLiveHandles(), 0);
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_NOT_INITIALIZED);
}

}  // namespace
