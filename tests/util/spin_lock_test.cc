// SpinLock: mutual exclusion (a counter and a two-word invariant that only hold if no two
// threads are ever inside at once), try_lock, and progress with more threads than cores
// (a holder that loses its core must get it back: waiters yield).
#include "util/spin_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace tower {
namespace {

// Non-atomic state that a lost exclusion corrupts: `count` loses increments and
// `mirror` stops matching it.
struct Guarded {
  SpinLock lock;
  int64_t count = 0;
  int64_t mirror = 0;
  int64_t torn = 0;  // times a thread saw count != mirror inside the lock
};

void Hammer(Guarded* g, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    std::lock_guard<SpinLock> hold(g->lock);
    // volatile: the compiler may not merge the increments into one store.
    volatile int64_t* count = &g->count;
    if (*count != g->mirror) ++g->torn;
    *count = *count + 1;
    std::this_thread::yield();  // widens the window a broken lock would let others into
    g->mirror = *count;
  }
}

TEST(SpinLockTest, ExcludesWithMoreThreadsThanCores) {
  // 8 threads on this 2-core machine: holders are preempted inside the section.
  constexpr int kThreads = 8;
  constexpr int kRounds = 2000;
  Guarded g;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(Hammer, &g, kRounds);
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(g.count, int64_t{kThreads} * kRounds);
  EXPECT_EQ(g.mirror, g.count);
  EXPECT_EQ(g.torn, 0);
}

TEST(SpinLockTest, TryLockFailsWhileHeldAndSucceedsAfter) {
  SpinLock lock;
  ASSERT_TRUE(lock.try_lock());
  bool other_got_it = true;
  std::thread other([&] { other_got_it = lock.try_lock(); });
  other.join();
  EXPECT_FALSE(other_got_it);
  lock.unlock();
  std::thread again([&] {
    other_got_it = lock.try_lock();
    if (other_got_it) lock.unlock();
  });
  again.join();
  EXPECT_TRUE(other_got_it);
}

TEST(SpinLockTest, WaiterGetsTheLockOnceReleased) {
  SpinLock lock;
  lock.lock();
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    lock.lock();
    acquired = true;
    lock.unlock();
  });
  // The waiter must still be waiting while the lock is held (it spins, then yields).
  for (int i = 0; i < 100; ++i) std::this_thread::yield();
  EXPECT_FALSE(acquired.load());
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(acquired.load());
}

// A holder that keeps the lock for long (milliseconds: the allocator growing through
// cudaMalloc) sends its waiters past their yields into sleeping between tries; they still
// take the lock once it is free.
TEST(SpinLockTest, WaitersOfALongHoldSleepAndStillGetTheLock) {
  SpinLock lock;
  lock.lock();
  std::atomic<int> acquired{0};
  std::vector<std::thread> waiters;
  for (int t = 0; t < 3; ++t) {
    waiters.emplace_back([&] {
      std::lock_guard<SpinLock> hold(lock);
      acquired.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(acquired.load(), 0);
  lock.unlock();
  for (std::thread& waiter : waiters) waiter.join();
  EXPECT_EQ(acquired.load(), 3);
}

}  // namespace
}  // namespace tower
