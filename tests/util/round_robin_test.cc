// RoundRobin: the deal of replicas to threads, against closed forms written out by hand.
#include "util/round_robin.h"

#include <vector>

#include "gtest/gtest.h"

namespace tower {
namespace {

std::vector<int> ItemsOf(const RoundRobin& deal, int owner) {
  std::vector<int> items;
  deal.ForEachOf(owner, [&](int item) { items.push_back(item); });
  return items;
}

TEST(RoundRobinTest, SevenItemsToThreeOwners) {
  const RoundRobin deal(7, 3);
  EXPECT_EQ(ItemsOf(deal, 0), (std::vector<int>{0, 3, 6}));
  EXPECT_EQ(ItemsOf(deal, 1), (std::vector<int>{1, 4}));
  EXPECT_EQ(ItemsOf(deal, 2), (std::vector<int>{2, 5}));
  const int owner[] = {0, 1, 2, 0, 1, 2, 0};
  const int previous[] = {-1, -1, -1, 0, 1, 2, 3};
  for (int item = 0; item < 7; ++item) {
    EXPECT_EQ(deal.owner_of(item), owner[item]) << item;
    EXPECT_EQ(deal.first_of_owner(item), item < 3) << item;
    EXPECT_EQ(deal.previous_of(item), previous[item]) << item;
  }
}

// Every item goes to exactly one owner, the one owner_of names, in increasing order, and
// owners past the items get none.
TEST(RoundRobinTest, EveryItemOnceToItsOwner) {
  for (int items = 0; items <= 9; ++items) {
    for (int owners = 1; owners <= 10; ++owners) {
      const RoundRobin deal(items, owners);
      std::vector<int> seen(static_cast<size_t>(items), 0);
      for (int owner = 0; owner < owners; ++owner) {
        const std::vector<int> mine = ItemsOf(deal, owner);
        for (size_t i = 0; i < mine.size(); ++i) {
          ++seen[static_cast<size_t>(mine[i])];
          EXPECT_EQ(deal.owner_of(mine[i]), owner);
          EXPECT_EQ(deal.previous_of(mine[i]), i == 0 ? -1 : mine[i - 1]);
        }
        if (owner >= items) EXPECT_TRUE(mine.empty());
      }
      for (int item = 0; item < items; ++item) EXPECT_EQ(seen[item], 1) << item;
    }
  }
}

}  // namespace
}  // namespace tower
