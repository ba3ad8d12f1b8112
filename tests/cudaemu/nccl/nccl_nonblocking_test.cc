// Non-blocking communicators in the NCCL emulation, as NCCL documents them: collectives, group
// end and finalize may return ncclInProgress while NCCL's thread issues the work, which
// ncclCommGetAsyncError is the only way to see done; calls on a communicator meanwhile are
// misuse (ncclInvalidArgument, then the communicator's asynchronous error); blocking
// communicators never return ncclInProgress. The progress thread is held where a test looks
// into the window, so nothing here depends on timing. The target sets CUDAEMU_GPUS=4.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "cudaemu/nccl_testing.h"
#include "tests/cudaemu/nccl/nccl_test_util.h"

namespace tower::nccl_test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class NcclNonBlockingTest : public ::testing::Test {
 protected:
  NcclNonBlockingTest()
      : watchdog_(60s, ::testing::UnitTest::GetInstance()->current_test_info()->name()) {}
  void TearDown() override {
    cudaemu::testing::HoldNcclProgress(false);
    cudaemu::testing::SetNcclInProgress(nullptr);
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) ncclCommAbort(comm);
    }
    cudaSetDevice(0);
  }

  // Two non-blocking ranks on devices 0 and 1, joined from this thread in one group.
  void MakeComms(int blocking = 0) {
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = blocking;
    comms_.assign(2, nullptr);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      const ncclResult_t result = ncclCommInitRankConfig(&comms_[r], 2, id, r, &config);
      ASSERT_TRUE(result == ncclSuccess || result == ncclInProgress) << result;
    }
    const ncclResult_t ended = ncclGroupEnd();
    ASSERT_TRUE(ended == ncclSuccess || ended == ncclInProgress) << ended;
    for (int r = 0; r < 2; ++r) ASSERT_EQ(WaitReady(r), ncclSuccess);
    for (int r = 0; r < 2; ++r) {
      buffers_.push_back(std::make_unique<DeviceBuffer<float>>(r, 5));
      streams_.push_back(std::make_unique<DeviceStream>(r));
      buffers_[r]->Upload(std::vector<float>(5, static_cast<float>(r + 1)));
    }
  }

  // Polls until the communicator is no longer ncclInProgress; its state then.
  ncclResult_t WaitReady(int r) {
    ncclResult_t state = ncclInProgress;
    Eventually(
        [&] {
          EXPECT_EQ(ncclCommGetAsyncError(comms_[r], &state), ncclSuccess);
          return state != ncclInProgress;
        },
        10s);
    return state;
  }

  ncclResult_t AllReduceBoth() {
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(ncclAllReduce(buffers_[r]->get(), buffers_[r]->get(), 5, ncclFloat, ncclSum,
                              comms_[r], streams_[r]->get()),
                ncclSuccess)
          << ncclGetLastError(comms_[r]);
    }
    return ncclGroupEnd();
  }

  Watchdog watchdog_;
  std::vector<ncclComm_t> comms_;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> buffers_;
  std::vector<std::unique_ptr<DeviceStream>> streams_;
};

TEST_F(NcclNonBlockingTest, GroupEndReturnsInProgressAndTheStreamHasNothingUntilIssued) {
  ASSERT_TRUE(cudaemu::testing::SetNcclInProgress("always"));
  MakeComms();
  cudaemu::testing::HoldNcclProgress(true);
  ASSERT_EQ(AllReduceBoth(), ncclInProgress);
  for (int r = 0; r < 2; ++r) {
    ncclResult_t state = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comms_[r], &state), ncclSuccess);
    EXPECT_EQ(state, ncclInProgress) << "rank " << r;
    // Nothing is on the stream yet: an idle stream does not mean the collective finished.
    EXPECT_EQ(cudaStreamQuery(streams_[r]->get()), cudaSuccess);
  }
  cudaemu::testing::HoldNcclProgress(false);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(WaitReady(r), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaStreamSynchronize(streams_[r]->get()), cudaSuccess);
    EXPECT_THAT(buffers_[r]->Download(), ::testing::Each(3.0f)) << "rank " << r;
  }
}

TEST_F(NcclNonBlockingTest, ACallWhileInProgressIsRefusedAndFailsTheCommunicator) {
  ASSERT_TRUE(cudaemu::testing::SetNcclInProgress("always"));
  MakeComms();
  cudaemu::testing::HoldNcclProgress(true);
  ASSERT_EQ(AllReduceBoth(), ncclInProgress);
  // Rank 0 goes on without polling: NCCL refuses the call...
  EXPECT_EQ(ncclAllReduce(buffers_[0]->get(), buffers_[0]->get(), 5, ncclFloat, ncclSum,
                          comms_[0], streams_[0]->get()),
            ncclInvalidArgument);
  EXPECT_THAT(ncclGetLastError(comms_[0]),
              HasSubstr("Attempt to use communicator before the previous operation returned "
                        "ncclSuccess"));
  EXPECT_EQ(ncclCommFinalize(comms_[0]), ncclInvalidArgument);
  // ... and the communicator keeps the error; rank 1, which polled, is fine.
  cudaemu::testing::HoldNcclProgress(false);
  EXPECT_EQ(WaitReady(0), ncclInvalidArgument);
  EXPECT_EQ(WaitReady(1), ncclSuccess);
}

TEST_F(NcclNonBlockingTest, SetupPolicyDefersOnlyTheFirstCollectivesAndFinalize) {
  ASSERT_TRUE(cudaemu::testing::SetNcclInProgress("setup"));
  MakeComms();
  cudaemu::testing::HoldNcclProgress(true);
  EXPECT_EQ(AllReduceBoth(), ncclInProgress);  // the peers connect in the background
  cudaemu::testing::HoldNcclProgress(false);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(WaitReady(r), ncclSuccess);
  EXPECT_EQ(AllReduceBoth(), ncclSuccess);  // connected: issued at once
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaStreamSynchronize(streams_[r]->get()), cudaSuccess);
    EXPECT_THAT(buffers_[r]->Download(), ::testing::Each(6.0f)) << "rank " << r;
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ncclCommFinalize(comms_[r]), ncclInProgress);
    EXPECT_EQ(WaitReady(r), ncclSuccess);
    EXPECT_EQ(ncclCommFinalize(comms_[r]), ncclInvalidArgument) << "finalized twice";
    EXPECT_EQ(ncclAllReduce(buffers_[r]->get(), buffers_[r]->get(), 5, ncclFloat, ncclSum,
                            comms_[r], streams_[r]->get()),
              ncclInvalidArgument)
        << "a collective after finalize";
    EXPECT_EQ(ncclCommDestroy(comms_[r]), ncclSuccess);
    comms_[r] = nullptr;
  }
}

TEST_F(NcclNonBlockingTest, BlockingCommunicatorsNeverReturnInProgress) {
  ASSERT_TRUE(cudaemu::testing::SetNcclInProgress("always"));
  MakeComms(/*blocking=*/1);
  EXPECT_EQ(AllReduceBoth(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ncclCommFinalize(comms_[r]), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(streams_[r]->get()), cudaSuccess);
    EXPECT_THAT(buffers_[r]->Download(), ::testing::Each(3.0f)) << "rank " << r;
  }
}

TEST_F(NcclNonBlockingTest, NeverPolicyIssuesAtOnce) {
  ASSERT_TRUE(cudaemu::testing::SetNcclInProgress("never"));
  MakeComms();
  EXPECT_EQ(AllReduceBoth(), ncclSuccess);
  EXPECT_EQ(ncclCommFinalize(comms_[0]), ncclSuccess);
}

TEST_F(NcclNonBlockingTest, BlockingAndNonBlockingInOneGroupAreRefused) {
  ncclComm_t blocking[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclCommInitAll(blocking, 2, nullptr), ncclSuccess);
  MakeComms();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(buffers_[0]->get(), buffers_[0]->get(), 5, ncclFloat, ncclSum,
                          comms_[0], streams_[0]->get()),
            ncclSuccess);
  EXPECT_EQ(ncclAllReduce(buffers_[1]->get(), buffers_[1]->get(), 5, ncclFloat, ncclSum,
                          blocking[1], streams_[1]->get()),
            ncclInvalidArgument);
  EXPECT_THAT(ncclGetLastError(nullptr), HasSubstr("blocking and non-blocking"));
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  for (ncclComm_t comm : blocking) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST_F(NcclNonBlockingTest, RandomPolicyFollowsItsProbability) {
  EXPECT_FALSE(cudaemu::testing::SetNcclInProgress("random:2"));
  EXPECT_FALSE(cudaemu::testing::SetNcclInProgress("sometimes"));
  ASSERT_TRUE(cudaemu::testing::SetNcclInProgress("random:0.5"));
  MakeComms();
  int in_progress = 0;
  for (int round = 0; round < 40; ++round) {
    const ncclResult_t ended = AllReduceBoth();
    ASSERT_TRUE(ended == ncclSuccess || ended == ncclInProgress) << ended;
    in_progress += ended == ncclInProgress;
    for (int r = 0; r < 2; ++r) ASSERT_EQ(WaitReady(r), ncclSuccess);
  }
  // 40 draws at 0.5: outside [5, 35] has probability < 1e-6.
  EXPECT_GE(in_progress, 5);
  EXPECT_LE(in_progress, 35);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaStreamSynchronize(streams_[r]->get()), cudaSuccess);
    EXPECT_THAT(buffers_[r]->Download(), ::testing::Each(3.0f * (1 << 19) * (1 << 20)))
        << "rank " << r;
  }
}

}  // namespace
}  // namespace tower::nccl_test
