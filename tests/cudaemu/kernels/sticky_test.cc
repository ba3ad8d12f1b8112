// Kernel faults: injected launch failures and divergent barriers. A fault makes its error
// sticky on the device's context for the rest of the process, so every test here faults on a
// device of its own (the BUILD file gives the process enough of them) and checks that the
// other devices still work.
#include <cuda_runtime.h>
#include <cudaemu/testing.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

constexpr unsigned kFull = 0xffffffffu;

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

__global__ void SetKernel(int* value, int to) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *value = to;
}

// Runs `launch` on a fresh stream of `device` and returns the error of the stream's
// synchronisation; `stderr_text` gets what the emulation printed meanwhile.
template <typename Launch>
cudaError_t RunOnDevice(int device, Launch launch, std::string* stderr_text) {
  EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
  (void)cudaGetLastError();  // what an earlier test left (its device's sticky error)
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  testing::internal::CaptureStderr();
  // No check of the launches' errors: a fault may already have made the context sticky.
  launch(stream);
  const cudaError_t error = cudaStreamSynchronize(stream);
  *stderr_text = testing::internal::GetCapturedStderr();
  std::printf("stderr: %s", stderr_text->c_str());
  return error;
}

// The device is poisoned: every later call that uses its context fails with the fault.
void ExpectSticky(int device) {
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);  // not reset: sticky
  void* ptr = nullptr;
  EXPECT_EQ(cudaMalloc(&ptr, 64), cudaErrorLaunchFailure);
  int host = 0;
  cudaemu::LaunchKernel(SetKernel, "SetKernel", 1, 1, 0, nullptr, &host, 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(host, 0);
}

// Another device still runs kernels.
void ExpectHealthy(int device) {
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);  // left by ExpectSticky's calls
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // this device is not sticky: reset
  int* value = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&value), sizeof(int)));
  cudaemu::LaunchKernel(SetKernel, "SetKernel", 1, 32, 0, nullptr, value, 7);
  CUDA_OK(cudaGetLastError());
  int host = 0;
  CUDA_OK(cudaMemcpy(&host, value, sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_EQ(host, 7);
  CUDA_OK(cudaFree(value));
}

TEST(StickyTest, FailLaunchInjectsALaunchFailure) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  int* value = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&value), sizeof(int)));
  CUDA_OK(cudaMemset(value, 0, sizeof(int)));
  const int64_t launches = cudaemu::testing::KernelLaunches();
  cudaemu::testing::FailLaunch(2);  // the second launch from now
  std::string printed;
  const cudaError_t error = RunOnDevice(
      0,
      [&](cudaStream_t stream) {
        cudaemu::LaunchKernel(SetKernel, "SetKernel", 1, 1, 0, stream, value, 1);
        cudaemu::LaunchKernel(SetKernel, "SetKernel", 1, 1, 0, stream, value, 2);
        cudaemu::LaunchKernel(SetKernel, "SetKernel", 1, 1, 0, stream, value, 3);
      },
      &printed);
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_EQ(cudaemu::testing::KernelLaunches(), launches + 3);
  EXPECT_NE(printed.find("SetKernel"), std::string::npos) << printed;
  // The first ran; the second did not, and the stream skipped the third.
  EXPECT_EQ(*value, 1);  // device memory is host memory
  ExpectSticky(0);
  ExpectHealthy(1);
}

__global__ void DivergentBarrierKernel(int* after) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  atomicAdd(after, 1);
}

TEST(StickyTest, DivergentSyncthreadsFaults) {
  int* after = nullptr;
  ASSERT_EQ(cudaSetDevice(2), cudaSuccess);
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&after), sizeof(int)));
  CUDA_OK(cudaMemset(after, 0, sizeof(int)));
  std::string printed;
  const cudaError_t error = RunOnDevice(
      2,
      [&](cudaStream_t stream) {
        cudaemu::LaunchKernel(DivergentBarrierKernel, "DivergentBarrierKernel", 4, 64, 0, stream,
                              after);
      },
      &printed);
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_NE(printed.find("DivergentBarrierKernel"), std::string::npos) << printed;
  EXPECT_NE(printed.find("__syncthreads"), std::string::npos) << printed;
  EXPECT_NE(printed.find("divergent"), std::string::npos) << printed;
  EXPECT_EQ(*after, 0);  // nobody passed the barrier, and the later blocks did not run
  ExpectSticky(2);
  ExpectHealthy(3);
}

// Even lanes wait at the block barrier, odd lanes in a shuffle with them: a deadlock.
__global__ void DeadlockKernel(int* out) {
  int v = static_cast<int>(threadIdx.x);
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    v = __shfl_xor_sync(kFull, v, 1);
  }
  out[threadIdx.x] = v;
}

TEST(StickyTest, DeadlockFaults) {
  int* out = nullptr;
  ASSERT_EQ(cudaSetDevice(4), cudaSuccess);
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&out), 32 * sizeof(int)));
  std::string printed;
  const cudaError_t error = RunOnDevice(
      4,
      [&](cudaStream_t stream) {
        cudaemu::LaunchKernel(DeadlockKernel, "DeadlockKernel", 1, 32, 0, stream, out);
      },
      &printed);
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_NE(printed.find("DeadlockKernel"), std::string::npos) << printed;
  EXPECT_NE(printed.find("deadlock"), std::string::npos) << printed;
  ExpectSticky(4);
  ExpectHealthy(5);
}

// Lane 5 leaves before the full-mask shuffle the others wait in.
__global__ void ExitedLaneKernel(int* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_sync(kFull, static_cast<int>(threadIdx.x), 0);
}

TEST(StickyTest, ShuffleWithAnExitedLaneFaults) {
  int* out = nullptr;
  ASSERT_EQ(cudaSetDevice(6), cudaSuccess);
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&out), 64 * sizeof(int)));
  std::string printed;
  const cudaError_t error = RunOnDevice(
      6,
      [&](cudaStream_t stream) {
        cudaemu::LaunchKernel(ExitedLaneKernel, "ExitedLaneKernel", 1, 64, 0, stream, out);
      },
      &printed);
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_NE(printed.find("ExitedLaneKernel"), std::string::npos) << printed;
  EXPECT_NE(printed.find("__shfl_sync"), std::string::npos) << printed;
  EXPECT_NE(printed.find("lane 5"), std::string::npos) << printed;
  ExpectSticky(6);
  ExpectHealthy(7);
}

// CUDAEMU_FAIL_LAUNCH=N fails the Nth launch of the process (its own cc_test target).
TEST(FailLaunchEnvTest, FailsTheNthLaunch) {
  const char* nth = std::getenv("CUDAEMU_FAIL_LAUNCH");
  if (nth == nullptr) GTEST_SKIP() << "CUDAEMU_FAIL_LAUNCH is not set";
  ASSERT_STREQ(nth, "3");
  ASSERT_EQ(cudaemu::testing::KernelLaunches(), 0);
  int values[4] = {0, 0, 0, 0};
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));
  for (int k = 0; k < 2; ++k) {
    cudaemu::LaunchKernel(SetKernel, "SetKernel", 1, 1, 0, stream, &values[k], 1);
  }
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(values[0], 1);
  EXPECT_EQ(values[1], 1);
  // (No check of the launch's error: the stream may already have run it and faulted.)
  cudaemu::LaunchKernel(SetKernel, "SetKernel", 1, 1, 0, stream, &values[2], 1);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorLaunchFailure);
  EXPECT_EQ(values[2], 0);
  ExpectSticky(0);
}

}  // namespace
