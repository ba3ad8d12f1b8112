#include "util/cache_line.h"

#include <atomic>
#include <cstdint>

#include <gtest/gtest.h>

namespace tower {
namespace {

template <typename T>
uintptr_t Line(const T* p) {
  return reinterpret_cast<uintptr_t>(p) / kCacheLineBytes;
}

// A padded value owns its lines: it starts one, and the next object starts the next.
TEST(CacheLinePaddedTest, EachValueOwnsItsLines) {
  static_assert(alignof(CacheLinePadded<char>) == kCacheLineBytes);
  static_assert(sizeof(CacheLinePadded<char>) == kCacheLineBytes);
  static_assert(sizeof(CacheLinePadded<char[65]>) == 2 * kCacheLineBytes);
  CacheLinePadded<std::atomic<int64_t>> counters[3];
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(&counters[i].value) % kCacheLineBytes, 0u);
    EXPECT_EQ(counters[i].value.load(), 0);  // value-initialised
  }
  EXPECT_NE(Line(&counters[0].value), Line(&counters[1].value));
  EXPECT_NE(Line(&counters[1].value), Line(&counters[2].value));
  // On the heap too (C++17's aligned new).
  auto* a = new CacheLinePadded<int>();
  auto* b = new CacheLinePadded<int>();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % kCacheLineBytes, 0u);
  EXPECT_NE(Line(&a->value), Line(&b->value));
  delete a;
  delete b;
}

}  // namespace
}  // namespace tower
