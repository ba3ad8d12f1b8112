// More replicas than threads: replicas as fibers on a few threads, meeting in barriers.
#include "strategy/runtime/replica_scheduler.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strategy/collectives/replica_barrier.h"
#include "util/cache_line.h"
#include "util/fiber.h"
#include "tests/testing/replica_threads.h"
#include "util/logging.h"

namespace tower {
namespace {

using ::testing::HasSubstr;

using testing::ReplicaNames;

// Runs `fn(replica)` on every replica of `scheduler` (a lambda through the plain-function
// interface).
template <typename Fn>
void RunAll(ReplicaScheduler& scheduler, Fn fn) {
  scheduler.Run([](void* context, int replica) { (*static_cast<Fn*>(context))(replica); }, &fn);
}

TEST(ReplicaSchedulerTest, ReplicaRRunsOnThreadRModuloTheThreadsTheFirstBeingTheCallers) {
  for (int threads : {1, 2, 3, 5}) {
    ReplicaScheduler scheduler(5, threads, /*spin=*/true);
    EXPECT_EQ(scheduler.uses_fibers(), threads < 5);
    for (int run = 0; run < 3; ++run) {  // fibers are started again every run
      std::vector<std::thread::id> ids(5);
      std::vector<int> calls(5, 0);
      RunAll(scheduler, [&](int r) {
        ids[r] = std::this_thread::get_id();
        ++calls[r];
        EXPECT_EQ(ReplicaScheduler::OnReplicaFiber(), threads < 5);
      });
      EXPECT_EQ(calls, std::vector<int>(5, 1));
      EXPECT_EQ(ids[0], std::this_thread::get_id());
      for (int a = 0; a < 5; ++a) {
        for (int b = 0; b < 5; ++b) {
          EXPECT_EQ(ids[a] == ids[b], a % threads == b % threads)
              << threads << " threads, replicas " << a << " and " << b;
        }
        // The deal that folding and batches read is the one the threads ran.
        EXPECT_EQ(scheduler.deal().owner_of(a), a % threads) << a;
      }
    }
  }
  EXPECT_FALSE(ReplicaScheduler::OnReplicaFiber());
  EXPECT_FALSE(ReplicaScheduler::YieldToOtherReplicas());  // not on a fiber: nothing to do
}

// Batched steps: the first replica of each of the first n threads only, each on its thread
// (the caller's for replica 0) and on the thread's own stack, run after run and between
// ordinary runs; the threads beyond n run nothing.
TEST(ReplicaSchedulerTest, AFirstOfThreadsRunRunsReplicasZeroToNOnTheirThreads) {
  for (int threads : {1, 2, 3}) {
    ReplicaScheduler scheduler(7, threads, /*spin=*/true);
    for (int n = 1; n <= threads; ++n) {
      for (int run = 0; run < 3; ++run) {
        std::vector<std::thread::id> first_ids(7), all_ids(7);
        std::vector<int> calls(7, 0);
        struct Context {
          std::vector<std::thread::id>* ids;
          std::vector<int>* calls;
        } context{&first_ids, &calls};
        scheduler.RunFirstOfThreads(
            n,
            [](void* c, int replica) {
              auto& context = *static_cast<Context*>(c);
              (*context.ids)[replica] = std::this_thread::get_id();
              ++(*context.calls)[replica];
              EXPECT_FALSE(ReplicaScheduler::OnReplicaFiber());
              EXPECT_FALSE(ReplicaScheduler::YieldToOtherReplicas());
            },
            &context);
        std::vector<int> want(7, 0);
        for (int t = 0; t < n; ++t) want[t] = 1;
        EXPECT_EQ(calls, want) << n << " of " << threads << " threads";
        EXPECT_EQ(first_ids[0], std::this_thread::get_id());
        // The same threads as an ordinary run's: replica t's.
        RunAll(scheduler, [&](int r) { all_ids[r] = std::this_thread::get_id(); });
        for (int t = 0; t < n; ++t) EXPECT_EQ(first_ids[t], all_ids[t]) << t;
      }
    }
  }
}

// Every replica increments its own counter between barriers; after each barrier all
// counters must be equal. Replicas sharing a thread can only pass the barrier by yielding
// to each other: without it the first fiber to wait would hold its thread to the deadline.
TEST(ReplicaSchedulerTest, FibersOnOneThreadMeetInBarriersInLockstep) {
  for (int threads : {1, 2, 3}) {
    constexpr int kReplicas = 8;
    constexpr int kRounds = 200;
    ReplicaScheduler scheduler(kReplicas, threads, /*spin=*/true);
    ReplicaBarrier barrier(ReplicaNames(kReplicas), std::chrono::seconds(30), /*spin=*/true);
    std::vector<std::atomic<int>> progress(kReplicas);
    std::atomic<int> violations{0};
    std::atomic<int> failures{0};
    RunAll(scheduler, [&](int r) {
      for (int round = 0; round < kRounds; ++round) {
        progress[r].store(round + 1);
        if (!barrier.Wait(r).ok()) failures++;
        for (int k = 0; k < kReplicas; ++k) {
          if (progress[k].load() != round + 1) violations++;
        }
        if (!barrier.Wait(r).ok()) failures++;
      }
    });
    EXPECT_EQ(failures.load(), 0) << threads << " threads";
    EXPECT_EQ(violations.load(), 0) << threads << " threads";
  }
}

TEST(ReplicaSchedulerTest, AMissingFiberIsNamedAtTheDeadlineAndWarnedAboutAtHalfOfIt) {
  ReplicaScheduler scheduler(4, 2, /*spin=*/true);
  ReplicaBarrier barrier(ReplicaNames(4), std::chrono::milliseconds(400), /*spin=*/true);
  std::vector<Status> results(4);
  ScopedLogCapture capture;
  const auto start = std::chrono::steady_clock::now();
  RunAll(scheduler, [&](int r) {
    if (r == 2) return;  // replica 2 (on thread 0, with replica 0) never arrives
    results[r] = barrier.Wait(r);
  });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(5));
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(IsDeadlineExceeded(results[r])) << r << ": " << results[r];
    EXPECT_THAT(results[r].message(), HasSubstr("waited for replica 2, which never arrived"));
  }
  EXPECT_THAT(capture.text(), HasSubstr("half its deadline"));
  EXPECT_THAT(capture.text(), HasSubstr("waits for replica 2;"));
}

TEST(ReplicaSchedulerTest, AnAbortReleasesWaitingFibers) {
  ReplicaScheduler scheduler(6, 2, /*spin=*/true);
  ReplicaBarrier barrier(ReplicaNames(6), std::chrono::seconds(60), /*spin=*/true);
  std::vector<Status> results(6);
  RunAll(scheduler, [&](int r) {
    if (r == 5) {
      barrier.Abort(InternalError("replica 5 failed"));
      return;
    }
    results[r] = barrier.Wait(r);
  });
  for (int r = 0; r < 5; ++r) EXPECT_THAT(results[r].message(), HasSubstr("replica 5 failed"));
}

// FiberLocal: each fiber has its own value, kept across switches; the thread's is apart.
TEST(ReplicaSchedulerTest, FiberLocalsArePerFiberAcrossYields) {
  static FiberLocal<int> local;
  local.Get() = -1;  // the calling thread's own
  ReplicaScheduler scheduler(6, 2, /*spin=*/true);
  ReplicaBarrier barrier(ReplicaNames(6), std::chrono::seconds(30), /*spin=*/true);
  std::atomic<int> wrong{0};
  for (int run = 0; run < 2; ++run) {
    RunAll(scheduler, [&](int r) {
      if (run == 1 && local.Get() != 100 + r) wrong++;  // kept from the first run
      local.Get() = 100 + r;
      for (int round = 0; round < 20; ++round) {
        if (!barrier.Wait(r).ok()) wrong++;
        if (local.Get() != 100 + r) wrong++;
      }
    });
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(local.Get(), -1);
}

// FiberLocal values are written all the time by the replica that owns them, and replicas
// run in step on different cores: no two replicas' values may share a cache line, not even
// those of fibers on one thread (allocated one after another from one heap).
TEST(ReplicaSchedulerTest, FiberLocalsOfReplicasShareNoCacheLine) {
  static FiberLocal<int> local;
  ReplicaScheduler scheduler(6, 2, /*spin=*/true);
  std::vector<uintptr_t> address(6, 0);
  RunAll(scheduler, [&](int r) { address[r] = reinterpret_cast<uintptr_t>(&local.Get()); });
  for (int a = 0; a < 6; ++a) {
    for (int b = a + 1; b < 6; ++b) {
      EXPECT_NE(address[a] / kCacheLineBytes, address[b] / kCacheLineBytes)
          << "replicas " << a << " and " << b;
    }
  }
}

}  // namespace
}  // namespace tower
