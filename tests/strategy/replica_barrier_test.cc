#include "strategy/collectives/replica_barrier.h"
#include "tests/testing/replica_threads.h"
#include "util/logging.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tower {
namespace {

using ::testing::HasSubstr;

using testing::ReplicaNames;

// Every replica increments its own counter between barriers; after each barrier all
// counters must be equal: nobody ran ahead.
void RunLockstep(int n, bool spin) {
  ReplicaBarrier barrier(ReplicaNames(n), std::chrono::seconds(30), spin);
  constexpr int kRounds = 2000;
  std::vector<std::atomic<int>> progress(n);
  std::atomic<int> violations{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      for (int round = 0; round < kRounds; ++round) {
        progress[r].store(round + 1);
        ASSERT_TRUE(barrier.Wait(r).ok());
        for (int k = 0; k < n; ++k) {
          if (progress[k].load() < round + 1) violations++;
        }
        ASSERT_TRUE(barrier.Wait(r).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(violations.load(), 0);
}

TEST(ReplicaBarrierTest, KeepsReplicasInLockstep) {
  RunLockstep(2, true);
  RunLockstep(4, false);
  RunLockstep(3, true);  // more threads than this machine's cores, spinning anyway
}

// Wait(replica, on_last, word): in every round exactly one replica runs on_last, after every
// replica's writes before the barrier (it sees all of them) and before any replica leaves
// (each sees what it wrote), and every replica gets the word it returned. Plain ints: under
// TSan a missing happens-before is a report.
void RunLastArrivalWork(int n, bool spin) {
  ReplicaBarrier barrier(ReplicaNames(n), std::chrono::seconds(30), spin);
  constexpr int kRounds = 2000;
  std::vector<int> progress(n, 0);
  int runs = 0;
  int done_round = 0;
  int missed_writes = 0;
  std::vector<int> early_leaves(n, 0);
  std::vector<int> wrong_words(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      for (int round = 1; round <= kRounds; ++round) {
        progress[r] = round;
        auto on_last = [&]() -> uint64_t {
          for (int k = 0; k < n; ++k) missed_writes += progress[k] != round;
          ++runs;
          // A few µs of work: longer than the others take to see an opened barrier.
          for (volatile int i = 0; i < 5000; ++i) {
          }
          done_round = round;
          return 1000 + round;
        };
        uint64_t word = 0;
        ASSERT_TRUE(barrier.Wait(r, on_last, &word).ok());
        early_leaves[r] += done_round != round;
        wrong_words[r] += word != static_cast<uint64_t>(1000 + round);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(runs, kRounds) << n << " replicas";
  EXPECT_EQ(missed_writes, 0) << n << " replicas";
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(early_leaves[r], 0) << "replica " << r << " of " << n;
    EXPECT_EQ(wrong_words[r], 0) << "replica " << r << " of " << n;
  }
}

TEST(ReplicaBarrierTest, TheLastToArriveRunsTheWorkOnceBeforeAnyoneLeaves) {
  RunLastArrivalWork(2, true);
  RunLastArrivalWork(4, false);
  RunLastArrivalWork(1, false);
}

TEST(ReplicaBarrierTest, AbortReleasesWaitersWithTheReason) {
  ReplicaBarrier barrier(ReplicaNames(3), std::chrono::seconds(30), true);
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] { results[r] = barrier.Wait(r); });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  barrier.Abort(AbortedError("replica 2 failed: boom"));
  for (auto& t : threads) t.join();
  for (const Status& s : results) {
    EXPECT_TRUE(s.code() == StatusCode::kAborted) << s;
    EXPECT_THAT(s.message(), HasSubstr("replica 2 failed: boom"));
  }
  // Later waits fail at once until Reset, then the barrier works again.
  EXPECT_FALSE(barrier.Wait(0).ok());
  barrier.Reset();
  std::vector<std::thread> again;
  std::atomic<int> ok{0};
  for (int r = 0; r < 3; ++r) again.emplace_back([&, r] { ok += barrier.Wait(r).ok(); });
  for (auto& t : again) t.join();
  EXPECT_EQ(ok.load(), 3);
}

TEST(ReplicaBarrierTest, TimeoutNamesTheMissingReplicaAndReleasesEveryone) {
  ReplicaBarrier barrier(ReplicaNames(3), std::chrono::milliseconds(200), true);
  std::vector<Status> results(2);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) threads.emplace_back([&, r] { results[r] = barrier.Wait(r); });
  for (auto& t : threads) t.join();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(5));
  for (const Status& s : results) {
    EXPECT_TRUE(IsDeadlineExceeded(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr("replica 2, which never arrived"));
  }
}

TEST(ReplicaBarrierTest, AtHalfTheDeadlineOneWaiterNamesTheLateReplica) {
  ScopedLogCapture log;
  ReplicaBarrier barrier(ReplicaNames(3), std::chrono::milliseconds(2000), false);
  std::vector<Status> results(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) threads.emplace_back([&, r] { results[r] = barrier.Wait(r); });
  // Replica 2 comes late: once the warning is out (at half the deadline), so with the other
  // half, 1000 ms, to spare, whatever the machine's load did to the waiters' wake-up.
  const auto start = std::chrono::steady_clock::now();
  while (log.text().find("half its deadline") == std::string::npos &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  results[2] = barrier.Wait(2);
  for (auto& t : threads) t.join();
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s;
  const std::string text = log.text();
  EXPECT_THAT(text, HasSubstr("a collective has waited 1000 ms, half its deadline: replica "));
  EXPECT_THAT(text, HasSubstr(" waits for replica 2; it gives up at 2000 ms"));
  // One warning for the collective, not one per waiter.
  EXPECT_EQ(text.find("half its deadline"), text.rfind("half its deadline")) << text;
  // In step: no warning.
  ScopedLogCapture quiet;
  std::vector<std::thread> prompt;
  for (int r = 0; r < 3; ++r) prompt.emplace_back([&, r] { EXPECT_TRUE(barrier.Wait(r).ok()); });
  for (auto& t : prompt) t.join();
  EXPECT_EQ(quiet.text(), "");
}

}  // namespace
}  // namespace tower
