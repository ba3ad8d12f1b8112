#include "util/spin_lock.h"

#include <chrono>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tower {
namespace {

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

}  // namespace

void SpinLock::LockSlow() {
  // Spins this many reads before each yield: a critical section here is well under the
  // ~100 pauses (a few µs) this allows, unless its holder lost its core.
  constexpr int kSpinsBeforeYield = 128;
  // A holder that keeps the lock for long (the allocator taking a region from cudaMalloc:
  // milliseconds) would have its waiters yield in a loop; after this many yields they
  // sleep between tries instead, leaving the cores to others.
  constexpr int kYieldsBeforeSleep = 64;
  constexpr auto kSleep = std::chrono::microseconds(50);
  for (int yields = 0;; ++yields) {
    for (int i = 0; i < kSpinsBeforeYield; ++i) {
      if (!locked_.load(std::memory_order_relaxed) &&
          !locked_.exchange(true, std::memory_order_acquire)) {
        return;
      }
      CpuRelax();
    }
    if (yields < kYieldsBeforeSleep) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kSleep);
    }
  }
}

}  // namespace tower
