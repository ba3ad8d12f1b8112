// NodePool / PoolAllocator: containers behave as with std::allocator, and once they have
// seen their largest size, inserting and erasing allocates nothing.
#include "util/node_pool.h"

#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing/allocation_counter.h"

namespace tower {
namespace {

using PooledSet = std::set<int64_t, std::less<int64_t>, PoolAllocator<int64_t>>;
using PooledMap = std::unordered_map<const void*, int, std::hash<const void*>,
                                     std::equal_to<const void*>,
                                     PoolAllocator<std::pair<const void* const, int>>>;

TEST(NodePoolTest, PooledContainersMatchPlainOnesAndStopAllocating) {
  NodePool pool;
  PooledSet pooled{std::less<int64_t>(), PoolAllocator<int64_t>(&pool)};
  PooledMap map(0, std::hash<const void*>(), std::equal_to<const void*>(),
                PooledMap::allocator_type(&pool));
  std::set<int64_t> plain;
  std::mt19937 random(7);
  // Keys to insert (>= 0) or erase (< 0, ~key), drawn before any counting.
  std::vector<int64_t> operations(20000);
  auto churn_pooled = [&] {
    for (int64_t op : operations) {
      if (op >= 0) {
        pooled.insert(op);
        map[reinterpret_cast<const void*>(op * 256)] = static_cast<int>(op);
      } else {
        pooled.erase(~op);
        map.erase(reinterpret_cast<const void*>(~op * 256));
      }
    }
  };
  auto churn_plain = [&] {
    for (int64_t op : operations) op >= 0 ? (void)plain.insert(op) : (void)plain.erase(~op);
  };
  auto draw = [&] {
    for (int64_t& op : operations) {
      const int64_t key = random() % 500;
      op = random() % 2 == 0 ? key : ~key;
    }
  };
  map.reserve(1000);
  draw();
  churn_pooled();  // the containers reach about their largest size
  churn_plain();
  ASSERT_EQ(std::set<int64_t>(pooled.begin(), pooled.end()), plain);
  draw();
  std::optional<testing::CountAllocations> counter;
  if (testing::CountAllocations::available()) counter.emplace();
  churn_pooled();
  const int64_t allocations = counter ? counter->count() : 0;
  counter.reset();
  churn_plain();
  EXPECT_EQ(std::set<int64_t>(pooled.begin(), pooled.end()), plain);
  EXPECT_EQ(map.size(), plain.size());
  for (int64_t key : plain) EXPECT_EQ(map.at(reinterpret_cast<const void*>(key * 256)), key);
  EXPECT_EQ(allocations, 0);
}

TEST(NodePoolTest, AssignedContainersTakeThePoolAlong) {
  NodePool pool;
  PooledSet later;  // no pool yet
  later = PooledSet(std::less<int64_t>(), PoolAllocator<int64_t>(&pool));
  EXPECT_EQ(later.get_allocator().pool(), &pool);
  for (int64_t i = 0; i < 1000; ++i) later.insert(i);
  EXPECT_EQ(later.size(), 1000u);
}

}  // namespace
}  // namespace tower
