#include "util/cache_line.h"

#include <atomic>
#include <cstdint>
#include <memory>

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

// What the allocator gives is whole lines: a record made through it (a reference count, say)
// shares its line with nothing else, however small it is.
TEST(CacheLineAllocatorTest, RecordsOwnTheirLines) {
  CacheLineAllocator<char> chars;
  char* a = chars.allocate(1);
  char* b = chars.allocate(1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % kCacheLineBytes, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % kCacheLineBytes, 0u);
  EXPECT_NE(Line(a), Line(b));
  chars.deallocate(a, 1);
  chars.deallocate(b, 1);
  // Through std::allocate_shared (rebound to the control block's type).
  auto x = std::allocate_shared<int>(CacheLineAllocator<int>(), 1);
  auto y = std::allocate_shared<int>(CacheLineAllocator<int>(), 2);
  EXPECT_NE(Line(x.get()), Line(y.get()));
  EXPECT_EQ(*x + *y, 3);
}

}  // namespace
}  // namespace tower
