// Order, batching, repeat, take/skip, counts and invalid compositions (no shuffling).
#include "data/dataset.h"

#include <numeric>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "data/tensor_source.h"
#include "tests/data/dataset_testing.h"

namespace tower::data {
namespace {

using testing::CheckNumberedContents;
using testing::Collect;
using testing::Numbered;
using testing::Rows;
using testing::Sizes;

std::vector<int64_t> Iota(int64_t n, int64_t first = 0) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<int64_t> Concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(DatasetTest, BatchesComeInSourceOrderWithExactRows) {
  StatusOr<std::vector<Batch>> batches = Collect(Numbered(10, 3).Batch(4));
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ(Sizes(*batches), (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(Rows(*batches), Iota(10));
  EXPECT_EQ(CheckNumberedContents(*batches), "");
  const Batch& last = batches->back();
  EXPECT_EQ(last.feature_dim, 3);
  EXPECT_EQ(last.target_dim, 1);
  EXPECT_EQ(last.features, (std::vector<float>{80, 81, 82, 90, 91, 92}));
  EXPECT_EQ(last.targets, (std::vector<float>{-8, -9}));
}

TEST(DatasetTest, DropRemainderDropsThePartialBatch) {
  const Dataset dataset = Numbered(10).Batch(4, /*drop_remainder=*/true);
  StatusOr<std::vector<Batch>> batches = Collect(dataset);
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ(Sizes(*batches), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(Rows(*batches), Iota(8));
  EXPECT_EQ(dataset.num_batches(), 2);
  EXPECT_EQ(Numbered(10).Batch(4).num_batches(), 3);
  EXPECT_EQ(Numbered(8).Batch(4, true).num_batches(), 2);
  EXPECT_EQ(Numbered(3).Batch(4, true).num_batches(), 0);
  ASSERT_TRUE(Collect(Numbered(3).Batch(4, true)).ok());
  EXPECT_TRUE(Collect(Numbered(3).Batch(4, true))->empty());
}

TEST(DatasetTest, UnbatchedGivesOneRowElements) {
  const Dataset dataset = Numbered(5);
  EXPECT_EQ(dataset.num_batches(), 5);
  EXPECT_EQ(dataset.batch_size(), 0);
  StatusOr<std::vector<Batch>> batches = Collect(dataset);
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ(Sizes(*batches), std::vector<int64_t>(5, 1));
  EXPECT_EQ(Rows(*batches), Iota(5));
  EXPECT_EQ(CheckNumberedContents(*batches), "");
}

TEST(DatasetTest, EndIsSticky) {
  StatusOr<std::unique_ptr<Iterator>> iterator = Numbered(3).Batch(2).MakeIterator();
  ASSERT_TRUE(iterator.ok());
  EXPECT_EQ((*iterator)->Next()->value().rows, 2);
  EXPECT_EQ((*iterator)->Next()->value().rows, 1);
  for (int i = 0; i < 3; ++i) {
    StatusOr<std::optional<Batch>> next = (*iterator)->Next();
    ASSERT_TRUE(next.ok());
    EXPECT_FALSE(next->has_value());
  }
}

TEST(DatasetTest, RepeatBeforeBatchMixesPasses) {
  const Dataset dataset = Numbered(10).Repeat(2).Batch(4);
  EXPECT_EQ(dataset.num_batches(), 5);
  StatusOr<std::vector<Batch>> batches = Collect(dataset);
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ(Sizes(*batches), (std::vector<int64_t>{4, 4, 4, 4, 4}));
  EXPECT_EQ(Rows(*batches), Concat(Iota(10), Iota(10)));
  // The third batch straddles the passes: rows 8, 9, 0, 1.
  EXPECT_EQ((*batches)[2].source_rows, (std::vector<int64_t>{8, 9, 0, 1}));
  EXPECT_EQ(CheckNumberedContents(*batches), "");
}

TEST(DatasetTest, RepeatAfterBatchKeepsEachPassPartialBatch) {
  const Dataset dataset = Numbered(10).Batch(4).Repeat(2);
  EXPECT_EQ(dataset.num_batches(), 6);
  StatusOr<std::vector<Batch>> batches = Collect(dataset);
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ(Sizes(*batches), (std::vector<int64_t>{4, 4, 2, 4, 4, 2}));
  EXPECT_EQ(Rows(*batches), Concat(Iota(10), Iota(10)));
  EXPECT_EQ(CheckNumberedContents(*batches), "");

  StatusOr<std::vector<Batch>> dropped = Collect(Numbered(10).Batch(4, true).Repeat(3));
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(Sizes(*dropped), std::vector<int64_t>(6, 4));
}

TEST(DatasetTest, RepeatCounts) {
  ASSERT_TRUE(Collect(Numbered(10).Repeat(0)).ok());
  EXPECT_TRUE(Collect(Numbered(10).Repeat(0).Batch(3))->empty());
  EXPECT_EQ(Numbered(10).Repeat(0).num_batches(), 0);
  EXPECT_EQ(Numbered(10).Repeat(3).Batch(7).num_batches(), 5);  // 30 rows
  EXPECT_EQ(Rows(*Collect(Numbered(10).Repeat(3).Batch(7))).size(), 30u);

  // Forever, cut by Take: before and after Batch.
  const Dataset forever = Numbered(10).Repeat();
  EXPECT_EQ(forever.num_batches(), -1);
  EXPECT_EQ(forever.num_rows(), 10);
  StatusOr<std::vector<Batch>> rows = Collect(forever.Take(25).Batch(10));
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(Sizes(*rows), (std::vector<int64_t>{10, 10, 5}));
  EXPECT_EQ(Rows(*rows), Concat(Concat(Iota(10), Iota(10)), Iota(5)));
  StatusOr<std::vector<Batch>> batches = Collect(Numbered(10).Batch(4).Repeat().Take(7));
  ASSERT_TRUE(batches.ok());
  EXPECT_EQ(Sizes(*batches), (std::vector<int64_t>{4, 4, 2, 4, 4, 2, 4}));
  EXPECT_EQ(Numbered(10).Batch(4).Repeat().Take(7).num_batches(), 7);
}

TEST(DatasetTest, RepeatingAnEmptyDatasetForeverEnds) {
  StatusOr<Dataset> empty = Dataset::FromTensors({}, 2, {}, 1);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->num_rows(), 0);
  for (const Dataset& dataset : {empty->Repeat(), empty->Batch(4).Repeat(), empty->Repeat().Batch(4),
                                 empty->Repeat().Repeat(), empty->Prefetch(0).Repeat()}) {
    StatusOr<std::vector<Batch>> batches = Collect(dataset);
    ASSERT_TRUE(batches.ok()) << batches.status();
    EXPECT_TRUE(batches->empty()) << dataset.DebugString();
    EXPECT_EQ(dataset.num_batches(), 0) << dataset.DebugString();
  }
}

TEST(DatasetTest, TakeAndSkipBeforeAndAfterBatch) {
  EXPECT_EQ(Rows(*Collect(Numbered(10).Take(3).Batch(2))), Iota(3));
  EXPECT_EQ(Sizes(*Collect(Numbered(10).Take(3).Batch(2))), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(Numbered(10).Take(3).Batch(2).num_batches(), 2);
  EXPECT_EQ(Numbered(10).Take(30).num_batches(), 10);
  EXPECT_EQ(Numbered(10).Take(-1).num_batches(), 10);
  EXPECT_EQ(Rows(*Collect(Numbered(10).Take(-1))), Iota(10));
  EXPECT_EQ(Sizes(*Collect(Numbered(10).Batch(4).Take(2))), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(Rows(*Collect(Numbered(10).Skip(8).Batch(4))), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(Numbered(10).Skip(8).Batch(4).num_batches(), 1);
  EXPECT_EQ(Rows(*Collect(Numbered(10).Batch(4).Skip(1))), Iota(6, 4));
  EXPECT_EQ(Numbered(10).Batch(4).Skip(1).num_batches(), 2);
  EXPECT_TRUE(Collect(Numbered(10).Skip(-1))->empty());
  EXPECT_TRUE(Collect(Numbered(10).Batch(3).Skip(-1))->empty());
  EXPECT_TRUE(Collect(Numbered(10).Skip(20))->empty());
  EXPECT_EQ(Numbered(10).Skip(20).num_batches(), 0);
  // Resuming mid-epoch: Skip(k) after Batch continues where k batches left off.
  StatusOr<std::vector<Batch>> all = Collect(Numbered(10).Repeat(2).Batch(3));
  StatusOr<std::vector<Batch>> resumed = Collect(Numbered(10).Repeat(2).Batch(3).Skip(4));
  ASSERT_TRUE(all.ok() && resumed.ok());
  const std::vector<int64_t> all_rows = Rows(*all);
  EXPECT_EQ(Rows(*resumed), std::vector<int64_t>(all_rows.begin() + 12, all_rows.end()));
}

TEST(DatasetTest, PrefetchBeforeBatchGivesTheSameBatches) {
  for (int64_t buffer : {0, 1, 3}) {
    StatusOr<std::vector<Batch>> batches = Collect(Numbered(10).Prefetch(buffer).Batch(4));
    ASSERT_TRUE(batches.ok()) << batches.status();
    EXPECT_EQ(Sizes(*batches), (std::vector<int64_t>{4, 4, 2}));
    EXPECT_EQ(Rows(*batches), Iota(10));
    EXPECT_EQ(CheckNumberedContents(*batches), "");
    EXPECT_EQ(Sizes(*Collect(Numbered(10).Prefetch(buffer).Batch(4, true))),
              (std::vector<int64_t>{4, 4}));
  }
}

TEST(DatasetTest, InvalidCompositionsAreStatusesNotCrashes) {
  const Dataset base = Numbered(10);
  struct Case {
    Dataset dataset;
    std::string message;
  };
  const Case cases[] = {
      {base.Batch(0), "Batch(0): batch_size must be at least 1 (in FromTensors(rows=10).Batch(0))"},
      {base.Batch(-3), "Batch(-3): batch_size must be at least 1 (in FromTensors(rows=10).Batch(-3))"},
      {base.Shuffle(0, 1), "Shuffle(0, 1): buffer_size must be at least 1 (in FromTensors(rows=10).Shuffle(0, 1))"},
      {base.Shuffle(-1, 1), "Shuffle(-1, 1): buffer_size must be at least 1 (in FromTensors(rows=10).Shuffle(-1, 1))"},
      {base.Repeat(-2), "Repeat(-2): count must be -1 (forever) or at least 0 (in FromTensors(rows=10).Repeat(-2))"},
      {base.Take(-2), "Take(-2): count must be -1 (all) or at least 0 (in FromTensors(rows=10).Take(-2))"},
      {base.Skip(-5), "Skip(-5): count must be -1 (all) or at least 0 (in FromTensors(rows=10).Skip(-5))"},
      {base.Prefetch(-1), "Prefetch(-1): buffer_batches must be at least 0 (in FromTensors(rows=10).Prefetch(-1))"},
      {base.Batch(2).Batch(3),
       "Batch(3): the dataset is already batched; a pipeline takes one Batch (batches of batches "
       "would need rank-3 elements) (in FromTensors(rows=10).Batch(2).Batch(3))"},
      // The first error wins and survives later operations.
      {base.Batch(0).Shuffle(0, 1).Repeat(),
       "Batch(0): batch_size must be at least 1 (in FromTensors(rows=10).Batch(0))"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.dataset.status(), InvalidArgumentError(c.message));
    StatusOr<std::unique_ptr<Iterator>> iterator = c.dataset.MakeIterator();
    EXPECT_EQ(iterator.status(), InvalidArgumentError(c.message));
  }
  EXPECT_TRUE(base.Batch(2).Shuffle(3, 1).Repeat(2).status().ok());
  EXPECT_EQ(base.MakeIterator(-1).status(),
            InvalidArgumentError("MakeIterator: epoch must be 0 or more, got -1"));

  Dataset empty;
  EXPECT_TRUE(IsFailedPrecondition(empty.status()));
  EXPECT_TRUE(IsFailedPrecondition(empty.Batch(4).MakeIterator().status()));
  EXPECT_EQ(empty.feature_dim(), 0);
  EXPECT_TRUE(empty.schema().feature_names.empty());
  EXPECT_EQ(Dataset::FromSource(nullptr).status(),
            InvalidArgumentError("Dataset::FromSource: null source"));
}

TEST(DatasetTest, FromTensorsValidatesShapes) {
  EXPECT_EQ(Dataset::FromTensors({1, 2, 3}, 2, {1}, 1).status(),
            InvalidArgumentError("FromTensors: 3 feature values do not make whole rows of 2"));
  EXPECT_EQ(Dataset::FromTensors({1, 2, 3, 4}, 2, {1}, 1).status(),
            InvalidArgumentError("FromTensors: the features have 2 rows of 2, so 2 target values "
                                 "(2 rows of 1) were expected, got 1"));
  EXPECT_EQ(Dataset::FromTensors({1, 2}, 0, {}, 1).status(),
            InvalidArgumentError("FromTensors: feature_dim must be at least 1, got 0"));
  EXPECT_EQ(Dataset::FromTensors({1, 2}, 1, {}, -1).status(),
            InvalidArgumentError("FromTensors: target_dim must be 0 or more, got -1"));
  Schema schema;
  schema.feature_names = {"a"};
  schema.target_names = {"t"};
  EXPECT_EQ(Dataset::FromTensors({1, 2, 3, 4}, 2, {1, 2}, 1, schema).status(),
            InvalidArgumentError("FromTensors: the schema names 1 feature columns, the data has 2"));
  schema.feature_names = {"a", "b"};
  StatusOr<Dataset> named = Dataset::FromTensors({1, 2, 3, 4}, 2, {1, 2}, 1, schema);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->schema().feature_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(named->schema().target_names, (std::vector<std::string>{"t"}));
  EXPECT_EQ(named->num_rows(), 2);
  EXPECT_EQ(named->DescribeRow(1), "row 1");

  // Default names; several targets; no targets.
  StatusOr<Dataset> two = Dataset::FromTensors({1, 2, 3}, 3, {4, 5}, 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->schema().feature_names, (std::vector<std::string>{"x0", "x1", "x2"}));
  EXPECT_EQ(two->schema().target_names, (std::vector<std::string>{"y0", "y1"}));
  EXPECT_EQ(Numbered(1).schema().target_names, (std::vector<std::string>{"y"}));
  StatusOr<Dataset> unlabeled = Dataset::FromTensors({1, 2, 3}, 1, {}, 0);
  ASSERT_TRUE(unlabeled.ok()) << unlabeled.status();
  StatusOr<std::vector<Batch>> batches = Collect(unlabeled->Batch(2));
  ASSERT_TRUE(batches.ok());
  EXPECT_EQ((*batches)[0].features, (std::vector<float>{1, 2}));
  EXPECT_TRUE((*batches)[0].targets.empty());
}

TEST(DatasetTest, IteratorOutlivesItsDataset) {
  std::unique_ptr<Iterator> iterator;
  {
    const Dataset dataset = Numbered(6).Shuffle(6, 1).Batch(4).Repeat(2).Prefetch(1);
    iterator = std::move(dataset.MakeIterator(0)).value();
  }
  int64_t rows = 0;
  while (true) {
    StatusOr<std::optional<Batch>> batch = iterator->Next();
    ASSERT_TRUE(batch.ok());
    if (!batch->has_value()) break;
    rows += (*batch)->rows;
  }
  EXPECT_EQ(rows, 12);
}

TEST(DatasetTest, CopiesShareTheSourceAndAreIndependentPipelines) {
  const Dataset base = Numbered(10);
  const Dataset batched = base.Batch(5);
  EXPECT_EQ(base.source().get(), batched.source().get());
  EXPECT_EQ(base.num_batches(), 10);
  EXPECT_EQ(batched.num_batches(), 2);
  EXPECT_EQ(batched.batch_size(), 5);
  EXPECT_EQ(base.Shuffle(100, 3).Batch(64).Prefetch().DebugString(),
            "FromTensors(rows=10).Shuffle(100, 3).Batch(64).Prefetch(2)");
}

TEST(TensorSourceTest, ReadGathersRunsAndSingleRows) {
  StatusOr<std::shared_ptr<const TensorSource>> source =
      TensorSource::Create({0, 1, 10, 11, 20, 21, 30, 31, 40, 41}, 2, {0, -1, -2, -3, -4}, 1);
  ASSERT_TRUE(source.ok());
  const int64_t rows[] = {3, 4, 0, 1, 2, 2, 1};
  std::vector<float> features(14);
  std::vector<float> targets(7);
  ASSERT_TRUE((*source)->Read(rows, 7, features.data(), targets.data()).ok());
  EXPECT_EQ(features, (std::vector<float>{30, 31, 40, 41, 0, 1, 10, 11, 20, 21, 20, 21, 10, 11}));
  EXPECT_EQ(targets, (std::vector<float>{-3, -4, 0, -1, -2, -2, -1}));
}

}  // namespace
}  // namespace tower::data
