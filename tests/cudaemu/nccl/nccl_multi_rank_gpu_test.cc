// NCCL_MULTI_RANK_GPU_ENABLE=1 (set by the target): two ranks of one communicator may share a
// GPU, and even a stream, when one thread drives both in a group.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <thread>
#include <vector>

#include "tests/cudaemu/nccl/nccl_test_util.h"

namespace tower::nccl_test {
namespace {

using namespace std::chrono_literals;

TEST(NcclMultiRankGpuTest, TwoRanksShareADeviceAndAStream) {
  Watchdog watchdog(60s);
  std::vector<ncclComm_t> comms(2);
  const std::vector<int> devices = {0, 0};
  ASSERT_EQ(ncclCommInitAll(comms.data(), 2, devices.data()), ncclSuccess)
      << ncclGetLastError(nullptr);
  DeviceBuffer<float> a(0, 1000), b(0, 1000);
  a.Upload(std::vector<float>(1000, 1.5f));
  b.Upload(std::vector<float>(1000, 2.0f));
  // Both on the legacy default stream of device 0: the group puts them in one work item.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(a.get(), a.get(), 1000, ncclFloat, ncclSum, comms[0], nullptr),
            ncclSuccess);
  ASSERT_EQ(ncclAllReduce(b.get(), b.get(), 1000, ncclFloat, ncclSum, comms[1], nullptr),
            ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_THAT(a.Download(), ::testing::Each(3.5f));
  EXPECT_THAT(b.Download(), ::testing::Each(3.5f));
  for (ncclComm_t comm : comms) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(NcclMultiRankGpuTest, RanksAsThreadsOnOneDevice) {
  Watchdog watchdog(60s);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::thread> threads;
  std::vector<int> ok(3, 0);
  // cudaFree synchronises the whole device: no rank frees before every rank's collective is
  // done (a rank's collective waits for the others, as on a GPU).
  Barrier all_done(3);
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(1);
      ncclComm_t comm = nullptr;
      const bool joined = ncclCommInitRank(&comm, 3, id, r) == ncclSuccess;
      {
        DeviceBuffer<int32_t> x(1, 7);
        x.Upload(std::vector<int32_t>(7, r + 1));
        DeviceStream stream(1);
        if (joined) ncclAllReduce(x.get(), x.get(), 7, ncclInt32, ncclProd, comm, stream.get());
        cudaStreamSynchronize(stream.get());
        const std::vector<int32_t> got = x.Download();
        ok[r] = joined && got == std::vector<int32_t>(7, 6) ? 1 : 0;
        all_done.Wait();
      }
      if (joined) ncclCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_THAT(ok, ::testing::Each(1));
}

}  // namespace
}  // namespace tower::nccl_test
