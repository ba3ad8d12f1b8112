// Shuffle: permutations, determinism, reshuffling per epoch and per repetition, tf.data's
// buffer semantics, and the same order whether rows or whole elements are shuffled.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "data/dataset.h"
#include "data/shuffle_buffer.h"
#include "tests/data/dataset_testing.h"

namespace tower::data {
namespace {

using testing::CheckNumberedContents;
using testing::Collect;
using testing::Numbered;
using testing::Rows;
using testing::Sizes;

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<int64_t> Order(const Dataset& dataset, int64_t epoch = 0) {
  StatusOr<std::vector<Batch>> batches = Collect(dataset, epoch);
  EXPECT_TRUE(batches.ok()) << batches.status();
  if (!batches.ok()) return {};
  EXPECT_EQ(CheckNumberedContents(*batches), "");
  return Rows(*batches);
}

TEST(ShuffleTest, FullBufferIsAPermutationThatChanges) {
  const std::vector<int64_t> order = Order(Numbered(100).Shuffle(100, 7).Batch(7));
  EXPECT_EQ(Sorted(order), Iota(100));
  EXPECT_NE(order, Iota(100));
  EXPECT_EQ(Sizes(*Collect(Numbered(100).Shuffle(100, 7).Batch(7))).back(), 2);
}

TEST(ShuffleTest, SameSeedSameOrderDifferentSeedDifferentOrder) {
  const Dataset a = Numbered(200).Shuffle(1000, 42).Batch(16);
  const Dataset b = Numbered(200).Shuffle(1000, 42).Batch(16);
  EXPECT_EQ(Order(a), Order(b));
  EXPECT_EQ(Order(a), Order(a));  // a second iterator over the same dataset
  EXPECT_NE(Order(a), Order(Numbered(200).Shuffle(1000, 43).Batch(16)));
  // The batch size does not change the row order.
  EXPECT_EQ(Order(a), Order(Numbered(200).Shuffle(1000, 42).Batch(5)));
  EXPECT_EQ(Order(a), Order(Numbered(200).Shuffle(1000, 42)));
}

TEST(ShuffleTest, EachEpochReshufflesDeterministically) {
  const Dataset dataset = Numbered(100).Shuffle(100, 1).Batch(10);
  std::set<std::vector<int64_t>> orders;
  for (int64_t epoch = 0; epoch < 5; ++epoch) {
    const std::vector<int64_t> order = Order(dataset, epoch);
    EXPECT_EQ(Sorted(order), Iota(100));
    EXPECT_EQ(order, Order(dataset, epoch));
    orders.insert(order);
  }
  EXPECT_EQ(orders.size(), 5u);
}

TEST(ShuffleTest, EachRepetitionReshuffles) {
  const std::vector<int64_t> order = Order(Numbered(50).Shuffle(50, 3).Repeat(3).Batch(8));
  ASSERT_EQ(order.size(), 150u);
  const std::vector<int64_t> first(order.begin(), order.begin() + 50);
  const std::vector<int64_t> second(order.begin() + 50, order.begin() + 100);
  const std::vector<int64_t> third(order.begin() + 100, order.end());
  EXPECT_EQ(Sorted(first), Iota(50));
  EXPECT_EQ(Sorted(second), Iota(50));
  EXPECT_EQ(Sorted(third), Iota(50));
  EXPECT_NE(first, second);
  EXPECT_NE(second, third);
  // The first repetition is the plain pass of that epoch.
  EXPECT_EQ(first, Order(Numbered(50).Shuffle(50, 3)));
  // Batch-then-repeat reshuffles each pass as well.
  const std::vector<int64_t> batched = Order(Numbered(50).Shuffle(50, 3).Batch(8).Repeat(2));
  EXPECT_EQ(std::vector<int64_t>(batched.begin(), batched.begin() + 50), first);
  EXPECT_EQ(std::vector<int64_t>(batched.begin() + 50, batched.end()), second);
}

TEST(ShuffleTest, ShuffleAfterRepeatMixesPasses) {
  const std::vector<int64_t> order = Order(Numbered(20).Repeat(2).Shuffle(40, 9));
  std::vector<int64_t> expected;
  for (int64_t r = 0; r < 20; ++r) expected.insert(expected.end(), {r, r});
  EXPECT_EQ(Sorted(order), expected);
  // Some row of the second pass comes out before some row of the first: the passes mix.
  const std::set<int64_t> first_half(order.begin(), order.begin() + 20);
  EXPECT_LT(first_half.size(), 20u);
}

TEST(ShuffleTest, BufferOfOneKeepsTheOrder) {
  EXPECT_EQ(Order(Numbered(64).Shuffle(1, 5).Batch(10)), Iota(64));
  EXPECT_EQ(Order(Numbered(64).Batch(4).Shuffle(1, 5)), Iota(64));
}

TEST(ShuffleTest, SmallBufferFollowsTfDataSemantics) {
  // With a buffer of k, output i is one of the first i + k inputs, and the first output is
  // uniform over the first k.
  const int64_t k = 4;
  std::map<int64_t, int> first_counts;
  for (uint64_t seed = 0; seed < 4000; ++seed) {
    const std::vector<int64_t> order = Order(Numbered(30).Shuffle(k, seed).Batch(30));
    ASSERT_EQ(Sorted(order), Iota(30));
    for (size_t i = 0; i < order.size(); ++i) {
      ASSERT_LT(order[i], static_cast<int64_t>(i) + k) << "seed " << seed << " position " << i;
    }
    ++first_counts[order[0]];
  }
  ASSERT_EQ(first_counts.size(), static_cast<size_t>(k));
  for (const auto& [row, count] : first_counts) {
    EXPECT_NEAR(count, 1000, 120) << "row " << row;
  }
  // A small buffer still moves rows: not the identity.
  EXPECT_NE(Order(Numbered(1000).Shuffle(2, 1).Batch(10)), Iota(1000));
}

TEST(ShuffleTest, FullBufferGivesEveryPermutationEquallyOften) {
  std::map<std::vector<int64_t>, int> counts;
  for (int64_t epoch = 0; epoch < 6000; ++epoch) {
    ++counts[Order(Numbered(3).Shuffle(3, 11), epoch)];
  }
  ASSERT_EQ(counts.size(), 6u);
  for (const auto& [order, count] : counts) EXPECT_NEAR(count, 1000, 130);
}

TEST(ShuffleTest, ShufflingBatchesKeepsThemWhole) {
  StatusOr<std::vector<Batch>> batches = Collect(Numbered(40).Batch(10).Shuffle(4, 2));
  ASSERT_TRUE(batches.ok());
  ASSERT_EQ(batches->size(), 4u);
  std::vector<int64_t> firsts;
  for (const Batch& batch : *batches) {
    ASSERT_EQ(batch.rows, 10);
    for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(batch.source_rows[i], batch.source_rows[0] + i);
    firsts.push_back(batch.source_rows[0]);
  }
  EXPECT_EQ(Sorted(firsts), (std::vector<int64_t>{0, 10, 20, 30}));
  EXPECT_EQ(CheckNumberedContents(*batches), "");
  // Epochs reshuffle batches too.
  std::set<std::vector<int64_t>> orders;
  for (int64_t epoch = 0; epoch < 8; ++epoch) {
    orders.insert(Order(Numbered(40).Batch(10).Shuffle(4, 2), epoch));
  }
  EXPECT_GT(orders.size(), 1u);
}

TEST(ShuffleTest, RowsAndElementsShuffleTheSameWay) {
  // Prefetch() moves the following Shuffle/Repeat from row indices to whole elements; the
  // order must not change.
  for (int64_t buffer : {1, 3, 17, 1000}) {
    for (int64_t epoch : {0, 1}) {
      const std::vector<int64_t> rows =
          Order(Numbered(57).Shuffle(buffer, 4).Repeat(2).Shuffle(5, 6).Batch(8), epoch);
      const std::vector<int64_t> elements =
          Order(Numbered(57).Prefetch(0).Shuffle(buffer, 4).Repeat(2).Shuffle(5, 6).Batch(8), epoch);
      const std::vector<int64_t> threaded =
          Order(Numbered(57).Prefetch(2).Shuffle(buffer, 4).Repeat(2).Shuffle(5, 6).Batch(8), epoch);
      EXPECT_EQ(rows, elements) << "buffer " << buffer;
      EXPECT_EQ(rows, threaded) << "buffer " << buffer;
    }
  }
}

TEST(ShuffleTest, NestedRepeatsDoNotRepeatAnOrder) {
  const std::vector<int64_t> order = Order(Numbered(30).Shuffle(30, 8).Repeat(2).Repeat(2));
  ASSERT_EQ(order.size(), 120u);
  std::set<std::vector<int64_t>> passes;
  for (int p = 0; p < 4; ++p) passes.emplace(order.begin() + 30 * p, order.begin() + 30 * (p + 1));
  EXPECT_EQ(passes.size(), 4u);
}

TEST(ShuffleTest, EndlessSourceShufflesWithinTheBuffer) {
  StatusOr<Dataset> endless = Dataset::Synthetic({"linreg", -1, 0});
  ASSERT_TRUE(endless.ok());
  StatusOr<std::vector<Batch>> batches = Collect(endless->Shuffle(100, 1).Batch(50).Take(4));
  ASSERT_TRUE(batches.ok()) << batches.status();
  const std::vector<int64_t> order = Rows(*batches);
  ASSERT_EQ(order.size(), 200u);
  EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), 200u);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_LT(order[i], static_cast<int64_t>(i) + 100);
}

TEST(ShuffleBufferTest, DrawsEachOfWhatItHoldsOnce) {
  ShuffleBuffer<int> buffer(3, 99);
  EXPECT_FALSE(buffer.full());
  buffer.Push(1);
  buffer.Push(2);
  buffer.Push(3);
  EXPECT_TRUE(buffer.full());
  std::multiset<int> out;
  while (!buffer.empty()) out.insert(buffer.Pop());
  EXPECT_EQ(out, (std::multiset<int>{1, 2, 3}));
}

TEST(ShuffleBufferTest, WantsMoreUntilFullOrUpstreamEnded) {
  ShuffleBuffer<int> buffer(2, 99);
  EXPECT_TRUE(buffer.WantsMore());
  buffer.Push(1);
  EXPECT_TRUE(buffer.WantsMore());
  buffer.Push(2);
  EXPECT_FALSE(buffer.WantsMore());  // full
  buffer.Pop();
  EXPECT_TRUE(buffer.WantsMore());  // a slot is free again
  buffer.UpstreamEnded();
  EXPECT_FALSE(buffer.WantsMore());  // room, but nothing left to pull
  buffer.Pop();
  EXPECT_FALSE(buffer.WantsMore());
  EXPECT_TRUE(buffer.empty());
}

// Pearson's chi-square statistic of observed counts against equal expected counts.
double ChiSquare(const std::vector<int64_t>& counts) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const double expected = static_cast<double>(total) / counts.size();
  double chi2 = 0;
  for (int64_t c : counts) chi2 += (c - expected) * (c - expected) / expected;
  return chi2;
}

// Uniform draws, tested statistically over 48,000 buffers (keys 0..47,999, so the outcome is
// fixed: the test is deterministic). A full buffer of 4 must give each of the 24 orders
// equally often, and each element first equally often. Bounds: the chi-square quantiles
// at p = 1e-6 (23 degrees of freedom: 65.0; 3: 30.7). A biased draw (for example the last
// slot favoured by a modulo) exceeds them by far.
TEST(ShuffleBufferTest, DrawsUniformlyFromWhatItHolds) {
  constexpr int kTrials = 48000;
  std::vector<int64_t> orders(24, 0), first(4, 0);
  for (int key = 0; key < kTrials; ++key) {
    ShuffleBuffer<int> buffer(4, static_cast<uint64_t>(key));
    for (int i = 0; i < 4; ++i) buffer.Push(i);
    std::vector<int> order;
    while (!buffer.empty()) order.push_back(buffer.Pop());
    ++first[order[0]];
    // The order's index among the 24 permutations (Lehmer code).
    int index = 0;
    for (int i = 0; i < 4; ++i) {
      int smaller_after = 0;
      for (int j = i + 1; j < 4; ++j) smaller_after += order[j] < order[i];
      index = index * (4 - i) + smaller_after;
    }
    ++orders[index];
  }
  EXPECT_LT(ChiSquare(orders), 65.0);
  EXPECT_LT(ChiSquare(first), 30.7);
  for (int64_t count : orders) EXPECT_GT(count, 0);
}

}  // namespace
}  // namespace tower::data
