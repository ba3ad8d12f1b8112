// Holds an IntraOpPool from another thread, for tests of what a call does while the pool
// is busy: a ParallelFor of two chunks that wait until the holder is destroyed.
#ifndef TOWER_TESTS_TESTING_HELD_INTRA_OP_POOL_H_
#define TOWER_TESTS_TESTING_HELD_INTRA_OP_POOL_H_

#include <atomic>
#include <chrono>
#include <thread>

#include "device/intra_op.h"

namespace tower::testing {

class HeldIntraOpPool {
 public:
  // Returns once `entered` (1 or 2) of the holding call's chunks run.
  HeldIntraOpPool(IntraOpPool& pool, int entered) {
    holder_ = std::thread([this, &pool] {
      pool.ParallelFor(2, [this](int) {
        entered_.fetch_add(1);
        while (!release_.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
      });
    });
    while (entered_.load() < entered) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  // Lets the holding call finish, and joins its thread.
  ~HeldIntraOpPool() {
    release_.store(true);
    holder_.join();
  }
  HeldIntraOpPool(const HeldIntraOpPool&) = delete;
  HeldIntraOpPool& operator=(const HeldIntraOpPool&) = delete;

 private:
  std::atomic<int> entered_{0};
  std::atomic<bool> release_{false};
  std::thread holder_;
};

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_HELD_INTRA_OP_POOL_H_
