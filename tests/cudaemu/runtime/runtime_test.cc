// The emulated runtime against CUDA's documentation: the thread's last error (a query's
// cudaErrorNotReady is recorded; cudaGetLastError resets), stream order and event waits as
// real happens-before edges, cudaMemGetInfo accounting, copy checks (kinds, overruns, freed
// pointers), allocation failure injection, and copies staged through the host.
//
// A "gate" holds a stream's worker on a host promise, so a test decides when work finishes.
#include <cuda_runtime_api.h>

#include <future>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cudaemu/runtime/internal.h"
#include "cudaemu/testing.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Blocks `stream` until the returned promise is set.
std::shared_ptr<std::promise<void>> Gate(cudaStream_t stream) {
  auto open = std::make_shared<std::promise<void>>();
  std::shared_future<void> opened = open->get_future().share();
  std::shared_ptr<cudaemu::internal::Stream> impl;
  EXPECT_EQ(cudaemu::internal::ResolveStream(stream, &impl), cudaSuccess);
  impl->Enqueue("gate", [opened] {
    opened.wait();
    return cudaSuccess;
  });
  return open;
}

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    cudaGetLastError();
  }
  void TearDown() override { EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess); }
  cudaStream_t stream_ = nullptr;
};

TEST_F(RuntimeTest, NotReadyIsRecordedAsTheLastErrorUntilRead) {
  auto gate = Gate(stream_);
  EXPECT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady);
  // The real runtime records it: the next launch's cudaGetLastError() would report it.
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  gate->set_value();
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(stream_), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(RuntimeTest, ErrorsNameThemselvesAsCudaDoes) {
  EXPECT_STREQ(cudaGetErrorName(cudaErrorNotReady), "cudaErrorNotReady");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorNotReady), "device not ready");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
  EXPECT_EQ(cudaSetDevice(3), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
}

TEST_F(RuntimeTest, WorkRunsInStreamOrder) {
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), 4 * sizeof(float)), cudaSuccess);
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 4 * sizeof(float)), cudaSuccess);
  auto gate = Gate(stream_);
  const float ones[4] = {1, 1, 1, 1};
  ASSERT_EQ(cudaMemcpyAsync(device, ones, sizeof(ones), cudaMemcpyHostToDevice, stream_),
            cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(device + 2, 0, 2 * sizeof(float), stream_), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned, device, sizeof(ones), cudaMemcpyDeviceToHost, stream_),
            cudaSuccess);
  // Into pinned memory the copy is asynchronous: nothing has run behind the gate yet.
  EXPECT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady);
  gate->set_value();
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(pinned[0], 1.0f);
  EXPECT_EQ(pinned[1], 1.0f);
  EXPECT_EQ(pinned[2], 0.0f);
  EXPECT_EQ(pinned[3], 0.0f);
  cudaGetLastError();
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

TEST_F(RuntimeTest, EventWaitOrdersAnotherStream) {
  cudaStream_t other;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t ready;
  ASSERT_EQ(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), cudaSuccess);
  int* device = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), sizeof(int)), cudaSuccess);
  auto gate = Gate(stream_);
  const int value = 42;
  ASSERT_EQ(cudaMemcpyAsync(device, &value, sizeof(int), cudaMemcpyHostToDevice, stream_),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ready, stream_), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ready), cudaErrorNotReady);
  ASSERT_EQ(cudaStreamWaitEvent(other, ready, 0), cudaSuccess);
  int* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(int)), cudaSuccess);
  *pinned = 0;
  ASSERT_EQ(cudaMemcpyAsync(pinned, device, sizeof(int), cudaMemcpyDeviceToHost, other),
            cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(cudaStreamQuery(other), cudaErrorNotReady);  // held by the event
  gate->set_value();
  ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  EXPECT_EQ(*pinned, 42);
  EXPECT_EQ(cudaEventQuery(ready), cudaSuccess);
  // A recorded-but-destroyed event, and double destruction.
  EXPECT_EQ(cudaEventDestroy(ready), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(ready), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamWaitEvent(other, ready, 0), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(other), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(other), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
}

TEST_F(RuntimeTest, AnEventNeverRecordedIsComplete) {
  cudaEvent_t event;
  ASSERT_EQ(cudaEventCreate(&event), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(stream_, event, 0), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
}

TEST_F(RuntimeTest, ElapsedTimeIsWhenTheStreamReachedEachEvent) {
  cudaEvent_t start, end, untimed;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  float ms = -1;
  // Never recorded: no time.
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  auto gate = Gate(stream_);
  ASSERT_EQ(cudaEventRecord(start, stream_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, stream_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(end, stream_), cudaSuccess);
  // Recorded but not reached.
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorNotReady);
  cudaGetLastError();
  // The stream reaches `start` and `end` when the gate opens, then `after` once the second
  // gate has held it for 30 ms. Each bound follows from what the host saw, not from how fast
  // the machine is: the stream reached `start` after the host opened the gate and `end`
  // before the host saw `end` complete; the second hold starts only once the stream has
  // reached `end`.
  auto between = Gate(stream_);
  cudaEvent_t after;
  ASSERT_EQ(cudaEventCreate(&after), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(after, stream_), cudaSuccess);
  const auto opened = std::chrono::steady_clock::now();
  gate->set_value();
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  const double host_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - opened)
          .count();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  between->set_value();
  ASSERT_EQ(cudaEventSynchronize(after), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 0);
  EXPECT_LE(ms, host_ms + 0.001);  // within the interval the host saw (float ms: 1 µs slack)
  ASSERT_EQ(cudaEventElapsedTime(&ms, end, after), cudaSuccess);
  EXPECT_GE(ms, 29.999);  // the second gate held the stream for 30 ms at least
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventElapsedTime(nullptr, start, end), cudaErrorInvalidValue);
  cudaGetLastError();
  for (cudaEvent_t event : {start, end, untimed, after}) EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
}

TEST_F(RuntimeTest, MemGetInfoCountsAllocationsAndTheContext) {
  size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  EXPECT_EQ(total, 1024 * kMiB);
  EXPECT_LE(free_before, total - 300 * kMiB);  // the context's own memory
  void* ptr = nullptr;
  ASSERT_EQ(cudaMalloc(&ptr, 100 * kMiB), cudaSuccess);
  EXPECT_EQ(cudaemu::testing::DeviceBytesInUse(0), 100 * kMiB + (total - 300 * kMiB - free_before));
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before - free_after, 100 * kMiB);
  // More than is free: out of memory, not sticky.
  void* big = nullptr;
  EXPECT_EQ(cudaMalloc(&big, free_after + 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaFree(ptr), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after, free_before);
}

TEST_F(RuntimeTest, InjectedAllocationFailure) {
  cudaemu::testing::FailAllocation(2);
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  EXPECT_EQ(cudaMalloc(&a, 256), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&b, 256), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaMalloc(&c, 256), cudaSuccess);
  cudaGetLastError();
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaFree(c), cudaSuccess);
}

TEST_F(RuntimeTest, CopiesCheckTheirPointersAndKinds) {
  char* device = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), 64), cudaSuccess);
  char host[128] = {};
  // Overrun of the allocation.
  EXPECT_EQ(cudaMemcpy(device, host, 65, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host, device + 32, 33, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  // Kinds that contradict the pointers.
  EXPECT_EQ(cudaMemcpy(host, device, 8, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device, host, 8, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device, device + 8, 8, cudaMemcpyHostToDevice),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemset(host, 0, 8), cudaErrorInvalidValue);
  // Correct ones, and cudaMemcpyDefault.
  EXPECT_EQ(cudaMemcpy(device, host, 64, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host, device, 64, cudaMemcpyDefault), cudaSuccess);
  cudaGetLastError();
  ASSERT_EQ(cudaFree(device), cudaSuccess);
  // Freed: neither a device pointer for copies nor for cudaFree.
  EXPECT_EQ(cudaMemcpy(host, device, 8, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(device), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host), cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST_F(RuntimeTest, PageableCopiesAndPeerCopiesWithoutAccessAreStaged) {
  float* a = nullptr;
  float* b = nullptr;
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&b), 16), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&a), 16), cudaSuccess);
  const int64_t pageable = cudaemu::testing::PageableAsyncCopies();
  const float values[4] = {1, 2, 3, 4};
  ASSERT_EQ(cudaMemcpyAsync(a, values, 16, cudaMemcpyHostToDevice, stream_), cudaSuccess);
  EXPECT_EQ(cudaemu::testing::PageableAsyncCopies(), pageable + 1);
  const int64_t staged = cudaemu::testing::StagedPeerCopies();
  ASSERT_EQ(cudaMemcpyPeerAsync(b, 1, a, 0, 16, stream_), cudaSuccess);
  EXPECT_EQ(cudaemu::testing::StagedPeerCopies(), staged + 1);
  ASSERT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
  cudaGetLastError();
  ASSERT_EQ(cudaMemcpyPeerAsync(b, 1, a, 0, 16, stream_), cudaSuccess);
  EXPECT_EQ(cudaemu::testing::StagedPeerCopies(), staged + 1);
  float back[4] = {};
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back, b, 16, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back[3], 4.0f);
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaFree(b), cudaSuccess);
}

TEST_F(RuntimeTest, CudaFreeWaitsForTheDevice) {
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), 16), cudaSuccess);
  auto gate = Gate(stream_);
  ASSERT_EQ(cudaMemsetAsync(device, 0, 16, stream_), cudaSuccess);
  std::thread open([gate] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    gate->set_value();
  });
  EXPECT_EQ(cudaFree(device), cudaSuccess);  // would be a use after free if it did not wait
  EXPECT_EQ(cudaStreamQuery(stream_), cudaSuccess);
  open.join();
}

}  // namespace
