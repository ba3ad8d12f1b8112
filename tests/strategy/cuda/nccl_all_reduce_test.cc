// The NCCL all-reduce paths under the CUDA emulation, where faults can be made to happen:
// a peer that is late, stalls, never joins setup or never reaches a collective. Each test is
// one way the NCCL code must not fail: a stale cudaErrorNotReady blamed on the next kernel,
// two replicas aborting at once, a setup that waits forever, a collective that can never
// finish holding the next copy to the host, and a communicator made for a single GPU.
//
// "Processes" are threads here: the cross-process path only needs ranks that share a unique
// id, and NCCL (the emulation's, or the real one on a machine with the cards) joins them in one
// process as it would across processes. On a card every case runs but the one that injects a
// fault (a rank that never delivers its collective); the emulation's counts of communicators
// made, live and aborted are checked only under it. Cases skip when the machine has fewer
// cards than their ranks.
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/context.h"
#include "device/cpu_platform.h"
#include "device/gpu_platform.h"
#include "ops/nn_ops.h"
#include "strategy/collectives/gpu_collectives.h"
#include "strategy/mirrored_strategy.h"
#include "tests/testing/emulation.h"
#include "tests/testing/gpu.h"
#include "tests/testing/gpu_contexts.h"

#ifdef CUDAEMU
#include <cudaemu/nccl_testing.h>
#endif

namespace tower {
namespace {

using ::testing::HasSubstr;
using std::chrono::milliseconds;
using testing::MakeNcclWorkers;
using testing::NcclWorker;
using testing::RealGpuContext;

std::unique_ptr<Context> Gpus() { return RealGpuContext(0, /*require_gpu=*/false); }

// Skips the case when `context` has fewer than `needed` cards.
#define TOWER_SKIP_WITHOUT_CARDS(context, needed)                                      \
  do {                                                                                 \
    const size_t cards = (*(context)->Devices("GPU")).size();                          \
    if (cards == 0) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");                  \
    if (cards < (needed)) {                                                            \
      GTEST_SKIP() << "needs " << (needed) << " cards; this machine has " << cards;    \
    }                                                                                  \
  } while (0)

Tensor Filled(Device* device, int64_t n, float value) {
  return *Tensor::FromHost(device, Shape{n}, std::vector<float>(static_cast<size_t>(n), value));
}

// Runs `fn` on a thread of its own and waits up to `limit` for it. A hang is reported and
// ends the test binary: the stuck thread cannot be joined, and a hung test must fail, not
// block the suite.
template <typename T>
T WithinOrDie(milliseconds limit, const char* what, std::function<T()> fn) {
  auto done = std::make_shared<std::promise<T>>();
  std::future<T> result = done->get_future();
  std::thread([done, fn] { done->set_value(fn()); }).detach();
  if (result.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "FAILED: %s did not return within %lld ms (it hangs)\n", what,
                 static_cast<long long>(limit.count()));
    std::fflush(stderr);
    std::_Exit(1);
  }
  return result.get();
}

TEST(NcclAcrossProcessesTest, AKernelAfterACollectiveThatHadToWaitSucceeds) {
  auto context = Gpus();
  TOWER_SKIP_WITHOUT_CARDS(context, 2u);
  std::vector<Device*> gpus = *context->Devices("GPU");
  std::vector<NcclWorker> workers = MakeNcclWorkers({{gpus[0]}, {gpus[1]}}, milliseconds(10000));
  ASSERT_TRUE(workers[0].status.ok()) << workers[0].status;
  ASSERT_TRUE(workers[1].status.ok()) << workers[1].status;
  Tensor a = Filled(gpus[0], 1024, 1.0f);
  Tensor b = Filled(gpus[1], 1024, 2.0f);
  Status late_status;
  std::thread late([&] {
    std::this_thread::sleep_for(milliseconds(200));  // worker 0 polls its stream meanwhile
    Tensor* mine[] = {&b};
    late_status = workers[1].ops->AllReduce(0, mine);
  });
  Tensor* mine[] = {&a};
  const Status status = workers[0].ops->AllReduce(0, mine);
  late.join();
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_TRUE(late_status.ok()) << late_status;
  // The next kernel of this thread (ReluGrad in backward, the optimizer's update) must not
  // report the cudaErrorNotReady that polling the stream left as the thread's last error.
  StatusOr<Tensor> relu = ops::Relu(a);
  ASSERT_TRUE(relu.ok()) << relu.status();
  EXPECT_EQ(*relu->ToHost(), std::vector<float>(1024, 3.0f));
}

TEST(NcclAcrossProcessesTest, TwoReplicasTimingOutTogetherEachAbortTheirCommunicatorOnce) {
  // Worker 0 holds ranks 0 and 1; worker 1 (rank 2) never comes to the collective, so both of
  // worker 0's replicas reach the deadline at the same time and abort concurrently.
  auto context = Gpus();
  TOWER_SKIP_WITHOUT_CARDS(context, 3u);
  std::vector<Device*> gpus = *context->Devices("GPU");
  gpus.resize(3);
#ifdef CUDAEMU
  const int64_t aborted_before = cudaemu::testing::NcclCommunicatorsAborted();
  const int64_t live_before = cudaemu::testing::NcclLiveCommunicators();
#endif
  // The deadline also bounds setup: long enough for a loaded machine.
  std::vector<NcclWorker> workers = MakeNcclWorkers({{gpus[0], gpus[1]}, {gpus[2]}}, milliseconds(1000));
  ASSERT_TRUE(workers[0].status.ok()) << workers[0].status;
  ASSERT_TRUE(workers[1].status.ok()) << workers[1].status;
  Tensor t0 = Filled(gpus[0], 256, 1.0f);
  Tensor t1 = Filled(gpus[1], 256, 1.0f);
  Status s0, s1;
  std::thread other([&] {
    Tensor* mine[] = {&t1};
    s1 = workers[0].ops->AllReduce(1, mine);
  });
  Tensor* mine[] = {&t0};
  s0 = workers[0].ops->AllReduce(0, mine);
  other.join();
  // Whichever replica aborted first reports the deadline; the other, that the communicators
  // were aborted because of it.
  EXPECT_TRUE(IsDeadlineExceeded(s0) || IsDeadlineExceeded(s1)) << s0 << "\n" << s1;
  EXPECT_THAT(s0.message(), HasSubstr("did not complete within 1000 ms"));
  EXPECT_THAT(s1.message(), HasSubstr("did not complete within 1000 ms"));
#ifdef CUDAEMU
  EXPECT_EQ(cudaemu::testing::NcclCommunicatorsAborted() - aborted_before, 2);
#endif
  // Later collectives say the communicator is gone rather than using it.
  const Status again = workers[0].ops->AllReduce(0, mine);
  EXPECT_FALSE(again.ok());
  workers[0].ops.reset();  // destroys nothing twice
#ifdef CUDAEMU
  EXPECT_EQ(cudaemu::testing::NcclLiveCommunicators(), live_before + 1);  // worker 1's
#endif
  workers[1].ops.reset();
#ifdef CUDAEMU
  EXPECT_EQ(cudaemu::testing::NcclLiveCommunicators(), live_before);
#endif
}

TEST(NcclAcrossProcessesTest, SetupEndsAtTheDeadlineWhenAWorkerNeverJoins) {
  auto context = Gpus();
  TOWER_SKIP_WITHOUT_CARDS(context, 1u);
  std::vector<Device*> gpus = *context->Devices("GPU");
#ifdef CUDAEMU
  const int64_t live_before = cudaemu::testing::NcclLiveCommunicators();
#endif
  const std::string id = *NewNcclUniqueId();
  // Rank 1 of 2 died between receiving the NCCL id and joining.
  const Status status = WithinOrDie<Status>(milliseconds(20000), "NCCL setup", [&] {
    return MakeNcclAllReduceAcrossProcesses({gpus[0]}, {"worker 0 replica 0"},
                                            milliseconds(500), id, 0, 2)
        .status();
  });
  EXPECT_TRUE(IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("500 ms"));
#ifdef CUDAEMU
  EXPECT_EQ(cudaemu::testing::NcclLiveCommunicators(), live_before) << "a communicator leaked";
#endif
}

TEST(NcclSingleProcessTest, AbortReleasesAReplicaWhoseCollectiveCanNeverFinish) {
#ifndef CUDAEMU
  TOWER_SKIP_NEEDS_EMULATION("fault injection (cudaemu::testing::SetNcclStall: a rank that "
                             "never delivers its collective)");
#else
  auto context = Gpus();
  std::vector<Device*> gpus = *context->Devices("GPU");
  gpus.resize(2);
  // Rank 1 never delivers its first collective: as if replica 1 failed between the barrier
  // and its launch.
  cudaemu::testing::SetNcclStall(1, "collective:1");
  StatusOr<std::unique_ptr<CrossDeviceOps>> ops =
      MakeNcclAllReduce(gpus, {"replica 0", "replica 1"}, milliseconds(2000));
  cudaemu::testing::ClearNcclFaults();
  ASSERT_TRUE(ops.ok()) << ops.status();
  Tensor t0 = Filled(gpus[0], 64, 1.0f);
  Tensor t1 = Filled(gpus[1], 64, 2.0f);
  std::thread replica1([&] {
    Tensor* mine[] = {&t1};
    (void)(*ops)->AllReduce(1, mine);
  });
  Tensor* mine[] = {&t0};
  (void)(*ops)->AllReduce(0, mine);
  replica1.join();
  // Replica 1 fails later in its step; the strategy aborts the collectives.
  (*ops)->Abort(InternalError("replica 1 failed"));
  // Replica 0's next copy to the host must not wait forever for the collective.
  WithinOrDie<bool>(milliseconds(20000), "the copy to the host after an abort", [&] {
    (void)t0.ToHost();
    return true;
  });
  (*ops)->Reset();
  const Status again = (*ops)->AllReduce(0, mine);
  EXPECT_FALSE(again.ok());
  EXPECT_THAT(again.message(), HasSubstr("aborted"));
#endif
}

TEST(NcclSingleProcessTest, OneGpuGetsNoCommunicator) {
  auto context = Gpus();
  TOWER_SKIP_WITHOUT_CARDS(context, 1u);
#ifdef CUDAEMU
  const int64_t created_before = cudaemu::testing::NcclCommunicatorsCreated();
#endif
  MirroredStrategyOptions options;
  options.context = context.get();
  options.devices = {"/GPU:0"};
  StatusOr<std::unique_ptr<MirroredStrategy>> strategy = MirroredStrategy::Create(options);
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  EXPECT_NE((*strategy)->extended().cross_device_ops_choice().kind, CrossDeviceOpsKind::kNccl);
#ifdef CUDAEMU
  EXPECT_EQ(cudaemu::testing::NcclCommunicatorsCreated(), created_before)
      << "one GPU has nothing to reduce with, yet got an NCCL communicator";
#endif
}

}  // namespace
}  // namespace tower
