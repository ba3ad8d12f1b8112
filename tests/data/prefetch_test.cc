// Prefetch: the same sequence as without it, a bounded queue, clean early destruction, and
// upstream errors delivered in order.
#include "data/prefetch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "tests/data/dataset_testing.h"

namespace tower::data {
namespace {

using testing::CheckNumberedContents;
using testing::Collect;
using testing::Numbered;
using testing::Rows;
using testing::Sizes;

// Rows r: feature r, target -r. Read fails for any batch holding `bad_row`, optionally
// sleeps, and counts the rows read.
class TestSource final : public Source {
 public:
  TestSource(int64_t rows, int64_t bad_row, std::chrono::milliseconds delay = {})
      : rows_(rows), bad_row_(bad_row), delay_(delay), schema_(DefaultSchema(1, 1)) {}

  int64_t num_rows() const override { return rows_; }
  int64_t feature_dim() const override { return 1; }
  int64_t target_dim() const override { return 1; }
  const Schema& schema() const override { return schema_; }
  Status Read(const int64_t* rows, int64_t n, float* features, float* targets) const override {
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    rows_read_ += n;
    for (int64_t i = 0; i < n; ++i) {
      if (rows[i] == bad_row_) {
        return InvalidArgumentError("row " + std::to_string(rows[i]) + " is unreadable");
      }
      features[i] = static_cast<float>(rows[i]);
      targets[i] = static_cast<float>(-rows[i]);
    }
    return OkStatus();
  }

  int64_t rows_read() const { return rows_read_.load(); }

 private:
  int64_t rows_;
  int64_t bad_row_;
  std::chrono::milliseconds delay_;
  Schema schema_;
  mutable std::atomic<int64_t> rows_read_{0};
};

TEST(PrefetchTest, SameSequenceAsWithout) {
  const Dataset base = Numbered(333).Shuffle(50, 4).Batch(16).Repeat(3);
  StatusOr<std::vector<Batch>> plain = Collect(base);
  ASSERT_TRUE(plain.ok());
  for (int64_t buffer : {1, 2, 8}) {
    for (int64_t epoch : {0, 1}) {
      StatusOr<std::vector<Batch>> prefetched = Collect(base.Prefetch(buffer), epoch);
      StatusOr<std::vector<Batch>> expected = Collect(base, epoch);
      ASSERT_TRUE(prefetched.ok() && expected.ok());
      EXPECT_EQ(Rows(*prefetched), Rows(*expected));
      EXPECT_EQ(Sizes(*prefetched), Sizes(*expected));
      EXPECT_EQ(CheckNumberedContents(*prefetched), "");
    }
  }
  // Prefetch twice, and in the middle of a pipeline.
  StatusOr<std::vector<Batch>> nested =
      Collect(Numbered(333).Prefetch(3).Shuffle(50, 4).Batch(16).Prefetch(1).Repeat(3).Prefetch(2));
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(Rows(*nested), Rows(*plain));
  EXPECT_EQ(Sizes(*nested), Sizes(*plain));
}

TEST(PrefetchTest, DestroyingEarlyStopsTheThread) {
  StatusOr<Dataset> endless = Dataset::Synthetic({"mlp", -1, 0});
  ASSERT_TRUE(endless.ok());
  for (int round = 0; round < 50; ++round) {
    StatusOr<std::unique_ptr<Iterator>> iterator =
        endless->Batch(32).Prefetch(4).MakeIterator(round);
    ASSERT_TRUE(iterator.ok());
    for (int i = 0; i < round % 4; ++i) {
      StatusOr<std::optional<Batch>> batch = (*iterator)->Next();
      ASSERT_TRUE(batch.ok());
      ASSERT_TRUE(batch->has_value());
      EXPECT_EQ((*batch)->rows, 32);
    }
    // The destructor runs here, with the producer blocked on a full queue or mid-batch.
  }
}

TEST(PrefetchTest, DestroyingWhileUpstreamIsSlowWaitsForItOnly) {
  auto source = std::make_shared<TestSource>(1000, -1, std::chrono::milliseconds(20));
  StatusOr<Dataset> dataset = Dataset::FromSource(source);
  ASSERT_TRUE(dataset.ok());
  const auto start = std::chrono::steady_clock::now();
  {
    StatusOr<std::unique_ptr<Iterator>> iterator = dataset->Batch(10).Prefetch(2).MakeIterator();
    ASSERT_TRUE(iterator.ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);  // one 20 ms read in flight, not the remaining 99
  EXPECT_LE(source->rows_read(), 20);
}

// Waits (up to 5 s) until the source has read `rows` rows: the producer's read-ahead.
void WaitForRowsRead(const TestSource& source, int64_t rows) {
  for (int i = 0; i < 500 && source.rows_read() < rows; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TEST(PrefetchTest, QueueIsBounded) {
  auto source = std::make_shared<TestSource>(100000, -1);
  StatusOr<Dataset> dataset = Dataset::FromSource(source);
  ASSERT_TRUE(dataset.ok());
  StatusOr<std::unique_ptr<Iterator>> iterator = dataset->Batch(10).Prefetch(3).MakeIterator();
  ASSERT_TRUE(iterator.ok());
  // Three batches queued and at most one more in the producer's hands, however long we wait.
  WaitForRowsRead(*source, 30);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_GE(source->rows_read(), 30);
  EXPECT_LE(source->rows_read(), 40);
  StatusOr<std::optional<Batch>> first = (*iterator)->Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->source_rows.front(), 0);
}

// Skip passes what the producer queued, then the upstream's: the next batch is the one after
// them, the sequence goes on from there (the producer started again), and a skip past the end
// passes what there was.
TEST(PrefetchTest, SkipPassesQueuedAndUpstreamBatchesInOrder) {
  auto source = std::make_shared<TestSource>(200, -1);
  StatusOr<Dataset> dataset = Dataset::FromSource(source);
  ASSERT_TRUE(dataset.ok());
  StatusOr<std::unique_ptr<Iterator>> iterator = dataset->Batch(10).Prefetch(3).MakeIterator();
  ASSERT_TRUE(iterator.ok());
  WaitForRowsRead(*source, 30);
  StatusOr<int64_t> passed = (*iterator)->Skip(5);  // 3 or 4 queued, the rest upstream's
  ASSERT_TRUE(passed.ok()) << passed.status();
  EXPECT_EQ(*passed, 5);
  StatusOr<std::optional<Batch>> next = (*iterator)->Next();
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ((*next)->source_rows.front(), 50);
  passed = (*iterator)->Skip(2);
  ASSERT_TRUE(passed.ok());
  EXPECT_EQ(*passed, 2);
  next = (*iterator)->Next();
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ((*next)->source_rows.front(), 80);
  // 11 batches left (90..199): a skip of 15 passes them and ends.
  passed = (*iterator)->Skip(15);
  ASSERT_TRUE(passed.ok());
  EXPECT_EQ(*passed, 11);
  next = (*iterator)->Next();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
}

TEST(PrefetchTest, ASkipThatMeetsAnErrorReturnsItAndItStays) {
  auto source = std::make_shared<TestSource>(100, 25);
  StatusOr<Dataset> dataset = Dataset::FromSource(source);
  ASSERT_TRUE(dataset.ok());
  StatusOr<std::unique_ptr<Iterator>> iterator = dataset->Batch(10).Prefetch(2).MakeIterator();
  ASSERT_TRUE(iterator.ok());
  StatusOr<int64_t> passed = (*iterator)->Skip(5);
  EXPECT_EQ(passed.status().message(), "row 25 is unreadable");
  StatusOr<std::optional<Batch>> next = (*iterator)->Next();
  EXPECT_EQ(next.status().message(), "row 25 is unreadable");
}

TEST(PrefetchTest, ErrorsArriveInOrderAndStay) {
  auto source = std::make_shared<TestSource>(100, 25);
  StatusOr<Dataset> dataset = Dataset::FromSource(source);
  ASSERT_TRUE(dataset.ok());
  const Status expected = InvalidArgumentError("row 25 is unreadable");
  for (const Dataset& pipeline :
       {dataset->Batch(10), dataset->Batch(10).Prefetch(2), dataset->Prefetch(4).Batch(10),
        dataset->Batch(10).Prefetch(1).Prefetch(3)}) {
    StatusOr<std::unique_ptr<Iterator>> iterator = pipeline.MakeIterator();
    ASSERT_TRUE(iterator.ok());
    for (int64_t b = 0; b < 2; ++b) {
      StatusOr<std::optional<Batch>> batch = (*iterator)->Next();
      ASSERT_TRUE(batch.ok()) << pipeline.DebugString() << ": " << batch.status();
      ASSERT_TRUE(batch->has_value());
      EXPECT_EQ((*batch)->source_rows.front(), b * 10);
    }
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ((*iterator)->Next().status(), expected) << pipeline.DebugString();
    }
  }
}

TEST(PrefetchTest, ErrorInsideRepeatAndShuffleStops) {
  auto source = std::make_shared<TestSource>(30, 29);
  StatusOr<Dataset> dataset = Dataset::FromSource(source);
  ASSERT_TRUE(dataset.ok());
  // The bad row reaches a batch at some point of every pass.
  StatusOr<std::vector<Batch>> batches =
      Collect(dataset->Shuffle(30, 1).Batch(4).Repeat().Prefetch());
  EXPECT_EQ(batches.status(), InvalidArgumentError("row 29 is unreadable"));
}

TEST(PrefetchTest, IteratorWrapperPassesTheEnd) {
  StatusOr<std::unique_ptr<Iterator>> upstream = Numbered(5).Batch(2).MakeIterator();
  ASSERT_TRUE(upstream.ok());
  StatusOr<std::unique_ptr<Iterator>> iterator =
      MakePrefetchIterator(std::move(upstream).value(), 1);
  ASSERT_TRUE(iterator.ok());
  std::vector<int64_t> sizes;
  while (true) {
    StatusOr<std::optional<Batch>> batch = (*iterator)->Next();
    ASSERT_TRUE(batch.ok());
    if (!batch->has_value()) break;
    sizes.push_back((*batch)->rows);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{2, 2, 1}));
  StatusOr<std::optional<Batch>> again = (*iterator)->Next();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
}

}  // namespace
}  // namespace tower::data
