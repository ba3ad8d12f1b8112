// Each emulated GPU owns its memory, as a real one does: a kernel given a pointer into another
// GPU's memory faults with CUDA's cudaErrorIllegalAddress (sticky on the launching device)
// unless the launching device enabled peer access to the owner; with it, the kernel reads and
// writes the peer's memory. The target sets CUDAEMU_GPUS=3; the fault poisons device 0 only.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

namespace {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

__global__ void AddKernel(const int* from, int* to, int add) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *to = *from + add;
}

// An int of `device`'s memory holding `value`.
int* DeviceInt(int device, int value) {
  int* ptr = nullptr;
  EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&ptr), sizeof(int)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(ptr, &value, sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  return ptr;
}

int Read(const int* ptr) {
  int value = -1;
  EXPECT_EQ(cudaMemcpy(&value, ptr, sizeof(int), cudaMemcpyDefault), cudaSuccess);
  return value;
}

TEST(PeerAccessTest, AKernelTouchingAnotherGpusMemoryWithoutPeerAccessFaults) {
  int* peer = DeviceInt(1, 10);
  int* own = DeviceInt(0, 0);
  CUDA_OK(cudaSetDevice(0));
  testing::internal::CaptureStderr();
  cudaemu::LaunchKernel(AddKernel, "AddKernel", 1, 1, 0, nullptr, peer, own, 1);
  // (No check of cudaGetLastError here: the kernel may already have faulted, as on a GPU.)
  const cudaError_t error = cudaDeviceSynchronize();
  const std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_EQ(error, cudaErrorIllegalAddress) << cudaGetErrorString(error);
  EXPECT_STREQ(cudaGetErrorString(error), "an illegal memory access was encountered");
  EXPECT_NE(printed.find("memory of CUDA device 1, which device 0 has no peer access to"),
            std::string::npos)
      << printed;
  // Sticky on device 0, as on a GPU; device 1 is unharmed and its value untouched.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  CUDA_OK(cudaSetDevice(1));
  (void)cudaGetLastError();
  EXPECT_EQ(Read(peer), 10);
  CUDA_OK(cudaFree(peer));
}

TEST(PeerAccessTest, WithPeerAccessEnabledTheKernelUsesThePeersMemory) {
  int* peer_in = DeviceInt(1, 20);
  int* peer_out = DeviceInt(1, 0);
  CUDA_OK(cudaSetDevice(2));
  CUDA_OK(cudaDeviceEnablePeerAccess(1, 0));
  cudaemu::LaunchKernel(AddKernel, "AddKernel", 1, 1, 0, nullptr, peer_in, peer_out, 2);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(Read(peer_out), 22);
  // Peer access is one way: device 1 was not given access to device 2's memory.
  int* own = DeviceInt(2, 5);
  CUDA_OK(cudaSetDevice(1));
  testing::internal::CaptureStderr();
  cudaemu::LaunchKernel(AddKernel, "AddKernel", 1, 1, 0, nullptr, own, peer_out, 0);
  const cudaError_t error = cudaDeviceSynchronize();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(error, cudaErrorIllegalAddress);
}

}  // namespace
