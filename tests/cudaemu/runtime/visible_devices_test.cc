// CUDA_VISIBLE_DEVICES renumbers the devices and ends at the first entry that names none
// ("2,0,7,1" on a 4-GPU machine: devices 2 and 0, as CUDA does).
#include <cuda_runtime_api.h>

#include <cstring>

#include <gtest/gtest.h>

namespace {

TEST(VisibleDevicesTest, RenumbersAndStopsAtTheFirstInvalidEntry) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 2);
  cudaDeviceProp first, second;
  ASSERT_EQ(cudaGetDeviceProperties(&first, 0), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceProperties(&second, 1), cudaSuccess);
  EXPECT_EQ(first.pciBusID, 0x10 + 2);  // physical GPU 2
  EXPECT_EQ(second.pciBusID, 0x10 + 0);
  EXPECT_NE(std::memcmp(first.uuid.bytes, second.uuid.bytes, 16), 0);
  EXPECT_EQ(first.totalGlobalMem, 2048u << 20);
  EXPECT_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);
}

}  // namespace
