// The rules that the index streams and the element iterators share (data/transform_rules.h),
// tested directly; tests/data/dataset_test.cc and shuffle_test.cc test them through pipelines.
#include "data/transform_rules.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace tower::data {
namespace {

// The keys RepeatSchedule hands out until it ends, at most `limit` of them; every repetition
// produces something.
std::vector<uint64_t> Keys(RepeatSchedule schedule, int limit) {
  std::vector<uint64_t> keys;
  while (static_cast<int>(keys.size()) < limit) {
    const std::optional<uint64_t> key = schedule.StartNext();
    if (!key.has_value()) break;
    keys.push_back(*key);
    schedule.Produced();
    schedule.Finished();
  }
  return keys;
}

TEST(RepeatScheduleTest, KeysArePinned) {
  // Every shuffle under a Repeat draws under these keys: changing them changes the order of
  // every repeated, shuffled pipeline. Repetition 0 keeps the Repeat's own key.
  EXPECT_EQ(Keys(RepeatSchedule(3, 7, 0), 10),
            (std::vector<uint64_t>{7, 0x300C491C19015D65ull, 0x1D716F86D4B56B89ull}));
  // Another salt (a nested Repeat) keys repetition 1 differently.
  EXPECT_EQ(Keys(RepeatSchedule(2, 7, 1), 10), (std::vector<uint64_t>{7, 0xAEF7613165C4D307ull}));
}

TEST(RepeatScheduleTest, StartsCountRepetitionsOrForever) {
  EXPECT_TRUE(Keys(RepeatSchedule(0, 7, 0), 10).empty());
  EXPECT_EQ(Keys(RepeatSchedule(1, 7, 0), 10).size(), 1u);
  EXPECT_EQ(Keys(RepeatSchedule(-1, 7, 0), 1000).size(), 1000u);
}

TEST(RepeatScheduleTest, AnEmptyRepetitionEndsItForGood) {
  RepeatSchedule schedule(-1, 7, 0);
  ASSERT_TRUE(schedule.StartNext().has_value());
  schedule.Produced();
  schedule.Finished();
  ASSERT_TRUE(schedule.StartNext().has_value());
  schedule.Finished();  // nothing produced
  EXPECT_FALSE(schedule.StartNext().has_value());
  EXPECT_FALSE(schedule.StartNext().has_value());
}

TEST(RepeatScheduleTest, TheEndOfTheCountStays) {
  RepeatSchedule schedule(1, 7, 0);
  ASSERT_TRUE(schedule.StartNext().has_value());
  schedule.Produced();
  schedule.Finished();
  EXPECT_FALSE(schedule.StartNext().has_value());
  EXPECT_FALSE(schedule.StartNext().has_value());
}

TEST(PositionWindowTest, TakePassesTheFirstCount) {
  PositionWindow window = PositionWindow::Take(3);
  EXPECT_EQ(window.ToDrop(), 0);
  EXPECT_EQ(window.Allow(10), 3);
  window.Advance(2);
  EXPECT_EQ(window.Allow(10), 1);
  EXPECT_EQ(window.Allow(1), 1);
  window.Advance(1);
  EXPECT_EQ(window.Allow(10), 0);
  EXPECT_EQ(PositionWindow::Take(0).Allow(1), 0);
}

TEST(PositionWindowTest, SkipDropsTheFirstCountThenPassesAll) {
  PositionWindow window = PositionWindow::Skip(3);
  EXPECT_EQ(window.ToDrop(), 3);
  window.Advance(2);
  EXPECT_EQ(window.ToDrop(), 1);
  window.Advance(1);
  EXPECT_EQ(window.ToDrop(), 0);
  EXPECT_EQ(window.Allow(1000), 1000);
  window.Advance(1000);
  EXPECT_EQ(window.ToDrop(), 0);
  EXPECT_EQ(window.Allow(PositionWindow::kUnbounded), PositionWindow::kUnbounded - 1003);
}

TEST(PositionWindowTest, AnEndedUpstreamLeavesNothingToDropOrPass) {
  PositionWindow skip = PositionWindow::Skip(5);
  skip.Advance(2);
  skip.UpstreamEnded();
  EXPECT_EQ(skip.ToDrop(), 0);
  EXPECT_EQ(skip.Allow(1), 0);
  PositionWindow take = PositionWindow::Take(5);
  take.Advance(2);
  take.UpstreamEnded();
  EXPECT_EQ(take.Allow(1), 0);
}

}  // namespace
}  // namespace tower::data
