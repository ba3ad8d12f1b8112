// SpinLock: a mutex for short critical sections that never block inside (a few hundred ns:
// the BFC allocator's bookkeeping), cheaper than std::mutex when uncontended.
//
// std::mutex (pthread) costs two atomic read-modify-writes and two calls per lock and
// unlock; this costs one exchange to lock and a plain release store to unlock. On this
// project's 2-core VM pthread's lock and unlock were 11 % of a `linreg` step of 8
// replicas, which allocate and free about 15 tensors each per step; with this lock that
// step ran 3.4 % faster (docs/BENCHMARKS.md).
//
// A waiter spins on a read (no cache-line traffic while the holder works) with `pause`,
// then yields its thread to the OS, so a holder that was preempted (more threads than
// cores) gets to run and release; a wait that outlasts 64 yields sleeps 50 µs between
// tries. Not reentrant; no fairness. Meets the Lockable
// requirements: std::lock_guard and std::unique_lock work with it.
#ifndef TOWER_UTIL_SPIN_LOCK_H_
#define TOWER_UTIL_SPIN_LOCK_H_

#include <atomic>

namespace tower {

class SpinLock {
 public:
  SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void lock() {
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    LockSlow();
  }
  bool try_lock() {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  void LockSlow();

  std::atomic<bool> locked_{false};
};

}  // namespace tower

#endif  // TOWER_UTIL_SPIN_LOCK_H_
