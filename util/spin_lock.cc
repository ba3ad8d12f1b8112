#include "util/spin_lock.h"

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
  for (;;) {
    for (int i = 0; i < kSpinsBeforeYield; ++i) {
      if (!locked_.load(std::memory_order_relaxed) &&
          !locked_.exchange(true, std::memory_order_acquire)) {
        return;
      }
      CpuRelax();
    }
    std::this_thread::yield();
  }
}

}  // namespace tower
