// The intra-op budget and pool (device/intra_op.h): the budget's defaults, scopes per thread
// and per fiber; the pool runs every chunk exactly once, on several threads, on the caller
// alone when another call holds it or after it stopped, allocates nothing per call, and lets
// the process exit (workers joined, destructors of statics still served).
#include "device/intra_op.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device/config.h"
#include "device/cpu_platform.h"
#include "tests/testing/allocation_counter.h"
#include "tests/testing/held_intra_op_pool.h"
#include "util/fiber.h"

namespace tower {
namespace {

using std::chrono::milliseconds;

// Resets the process's settings after a test that changed them (the runtime is never
// initialised in this binary, so they may change at any time).
struct RestoreSettings {
  ~RestoreSettings() {
    TOWER_CHECK_OK(config::SetIntraOpParallelismThreads(0));
    TOWER_CHECK_OK(config::SetInterOpParallelismThreads(0));
  }
};

TEST(IntraOpBudgetTest, DefaultIsOneThreadPerUsableCore) {
  ASSERT_EQ(config::GetIntraOpParallelismThreads(), 0);
  EXPECT_GE(UsableCores(), 1);
  EXPECT_EQ(ResolvedIntraOpThreads(), UsableCores());
  EXPECT_EQ(ResolvedInterOpThreads(), UsableCores());
  EXPECT_EQ(CurrentIntraOpThreads(), UsableCores());
}

TEST(IntraOpBudgetTest, ResolvedSettingsFollowTheConfiguration) {
  RestoreSettings restore;
  ASSERT_TRUE(config::SetIntraOpParallelismThreads(5).ok());
  ASSERT_TRUE(config::SetInterOpParallelismThreads(3).ok());
  EXPECT_EQ(ResolvedIntraOpThreads(), 5);
  EXPECT_EQ(CurrentIntraOpThreads(), 5);  // no scope: the setting
  EXPECT_EQ(ResolvedInterOpThreads(), 3);
  ASSERT_TRUE(config::SetIntraOpParallelismThreads(0).ok());
  EXPECT_EQ(CurrentIntraOpThreads(), UsableCores());
}

TEST(IntraOpBudgetTest, ScopesNestAndBelongToTheirThread) {
  const int outside = CurrentIntraOpThreads();
  {
    ScopedIntraOpThreads three(3);
    EXPECT_EQ(CurrentIntraOpThreads(), 3);
    {
      ScopedIntraOpThreads one(1);
      EXPECT_EQ(CurrentIntraOpThreads(), 1);
      ScopedIntraOpThreads back_to_default(0);
      EXPECT_EQ(CurrentIntraOpThreads(), outside);
    }
    EXPECT_EQ(CurrentIntraOpThreads(), 3);
    int other_thread = -1;
    std::thread([&] { other_thread = CurrentIntraOpThreads(); }).join();
    EXPECT_EQ(other_thread, outside);  // another thread (a replica) has its own budget
  }
  EXPECT_EQ(CurrentIntraOpThreads(), outside);
}

// Replica fibers sharing a thread each keep their own budget across switches.
struct FiberCase {
  Fiber* thread_fiber;
  Fiber* replica;
  int seen_after_switch = -1;
};

Fiber* ReplicaEntry(void* arg) {
  auto& c = *static_cast<FiberCase*>(arg);
  ScopedIntraOpThreads budget(3);
  c.replica->SwitchTo(c.thread_fiber);  // the thread's code runs, with a scope of its own
  c.seen_after_switch = CurrentIntraOpThreads();
  return c.thread_fiber;
}

TEST(IntraOpBudgetTest, EachFiberHasItsOwnBudget) {
  const int outside = CurrentIntraOpThreads();
  std::unique_ptr<Fiber> thread_fiber = Fiber::ForThread();
  std::unique_ptr<Fiber> replica = Fiber::Create();
  FiberCase c{thread_fiber.get(), replica.get()};
  replica->Start(ReplicaEntry, &c);
  thread_fiber->SwitchTo(replica.get());  // the replica sets 3 and switches back
  EXPECT_EQ(CurrentIntraOpThreads(), outside);
  {
    ScopedIntraOpThreads two(2);
    thread_fiber->SwitchTo(replica.get());  // the replica reads its budget and ends
    EXPECT_EQ(CurrentIntraOpThreads(), 2);
  }
  EXPECT_EQ(c.seen_after_switch, 3);
  EXPECT_EQ(CurrentIntraOpThreads(), outside);
}

TEST(IntraOpPoolTest, EveryChunkRunsExactlyOnce) {
  IntraOpPool pool(2);
  std::vector<std::atomic<int>> runs(70);
  for (int chunks = 0; chunks <= 70; ++chunks) {
    for (int repeat = 0; repeat < 20; ++repeat) {
      for (auto& r : runs) r.store(0);
      pool.ParallelFor(chunks, [&](int c) { runs[c].fetch_add(1); });
      for (int c = 0; c < 70; ++c) {
        ASSERT_EQ(runs[c].load(), c < chunks ? 1 : 0) << chunks << " chunks, chunk " << c;
      }
    }
  }
}

// Two chunks that each wait for the other to have started: only threads running them at the
// same time get through (a pool that ran them one after the other would time out).
bool RanTogether(IntraOpPool& pool) {
  std::atomic<int> entered{0};
  std::atomic<bool> together{true};
  pool.ParallelFor(2, [&](int) {
    entered.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (entered.load() < 2) {
      if (std::chrono::steady_clock::now() > deadline) {
        together.store(false);
        return;
      }
      std::this_thread::yield();
    }
  });
  return together.load();
}

TEST(IntraOpPoolTest, WorkersRunChunksBesideTheCaller) {
  IntraOpPool pool(1);
  EXPECT_TRUE(RanTogether(pool));  // the worker was polling
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_TRUE(RanTogether(pool));  // the worker had blocked: woken
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(RanTogether(pool)) << i;
}

TEST(IntraOpPoolTest, BusyPoolRunsEveryChunkOnTheCaller) {
  IntraOpPool pool(1);
  std::vector<std::thread::id> ran_on(5);
  {
    testing::HeldIntraOpPool held(pool, /*entered=*/2);
    pool.ParallelFor(5, [&](int c) { ran_on[c] = std::this_thread::get_id(); });
  }
  for (int c = 0; c < 5; ++c) EXPECT_EQ(ran_on[c], std::this_thread::get_id()) << "chunk " << c;
  EXPECT_EQ(pool.busy_fallbacks(), 1u);
  EXPECT_EQ(pool.split_calls(), 2u);
  EXPECT_TRUE(RanTogether(pool));  // free again
}

TEST(IntraOpPoolTest, AfterStopCallsRunOnTheCaller) {
  IntraOpPool pool(2);
  EXPECT_TRUE(RanTogether(pool));
  pool.Stop();
  pool.Stop();  // idempotent
  std::vector<std::thread::id> ran_on(4);
  pool.ParallelFor(4, [&](int c) { ran_on[c] = std::this_thread::get_id(); });
  for (int c = 0; c < 4; ++c) EXPECT_EQ(ran_on[c], std::this_thread::get_id());
}

TEST(IntraOpPoolTest, CallsAllocateNothing) {
  if (!testing::CountAllocations::available()) GTEST_SKIP() << "sanitizers own malloc";
  IntraOpPool pool(2);
  std::atomic<int64_t> sum{0};
  auto chunk = [&](int c) { sum.fetch_add(c); };
  pool.ParallelFor(8, chunk);  // warm: the workers have started and set their budgets
  ParallelFor(8, chunk);       // the global pool too
  std::optional<testing::CountAllocations> counter(std::in_place);
  for (int i = 0; i < 1000; ++i) {
    pool.ParallelFor(8, chunk);
    ParallelFor(3, chunk);
    ParallelFor(1, chunk);
  }
  const int64_t allocations = counter->count();
  counter.reset();
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(sum.load(), 28 + 28 + 1000 * (28 + 3 + 0));
}

// At exit the global pool's workers are joined (a hang here times the test out), and a
// destructor of a static that runs after that still gets its chunks run, on its thread.
struct UsesThePoolWhenDestroyed {
  ~UsesThePoolWhenDestroyed() {
    std::atomic<int> ran{0};
    ParallelFor(4, [&](int) { ran.fetch_add(1); });
    std::fprintf(stderr, "destructor ran %d chunks after exit (pool stopped: %d)\n", ran.load(),
                 IntraOpPool::Global().stopped() ? 1 : 0);
  }
};

TEST(IntraOpPoolDeathTest, ExitJoinsTheWorkers) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        static UsesThePoolWhenDestroyed destroyed_last;  // made before the pool
        TOWER_CHECK_OK(config::SetIntraOpParallelismThreads(3));
        std::atomic<int> ran{0};
        ParallelFor(6, [&](int) { ran.fetch_add(1); });
        std::fprintf(stderr, "workers=%d ran=%d\n", IntraOpPool::Global().workers(),
                     ran.load());
        std::exit(0);
      },
      ::testing::ExitedWithCode(0),
      "workers=2 ran=6\n(.|\n)*destructor ran 4 chunks after exit \\(pool stopped: 1\\)");
}

}  // namespace
}  // namespace tower
