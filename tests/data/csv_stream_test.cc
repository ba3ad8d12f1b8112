// Streaming CSV (data/csv_stream.h): the same rows and messages as ReadCsv, shares that split
// the rows exactly once without reading each other's bytes, deterministic shuffles, and global
// batches that do not depend on which worker reads which share.
#include "data/csv_stream.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "data/csv_shards.h"
#include "data/dataset.h"
#include "tests/data/dataset_testing.h"

namespace tower::data {
namespace {

using testing::Collect;
using testing::WriteTempFile;

// `rows` rows of a,b,y: cells written in the forms CSV allows (quotes, spaces, CRLF).
std::string MakeCsv(int64_t rows, int64_t first = 0) {
  std::string text = "a, \"b\",y\r\n";
  for (int64_t r = first; r < first + rows; ++r) {
    text += std::to_string(r) + ",\"" + std::to_string(r * 0.5) + "\" , " + std::to_string(-r) +
            (r % 3 == 0 ? "\r\n" : "\n");
  }
  return text;
}

CsvStreamOptions Options(std::vector<std::string> files, int64_t chunk_bytes = 1 << 20) {
  CsvStreamOptions options;
  options.files = std::move(files);
  options.csv.target_columns = {"y"};
  options.chunk_bytes = chunk_bytes;
  return options;
}

// Every row of `share` of `shares`: features then targets, flattened.
struct Rows {
  std::vector<float> features, targets;
  std::vector<int64_t> ids;
};
Rows ReadShare(const std::shared_ptr<const CsvFileSet>& set, int64_t share, int64_t shares) {
  Rows rows;
  StatusOr<Dataset> dataset =
      Dataset::FromStream(std::make_shared<CsvShareStream>(set, share, shares));
  EXPECT_TRUE(dataset.ok()) << dataset.status().message();
  StatusOr<std::vector<Batch>> batches = Collect(*dataset);
  EXPECT_TRUE(batches.ok()) << batches.status().message();
  for (const Batch& batch : *batches) {
    rows.features.insert(rows.features.end(), batch.features.begin(), batch.features.end());
    rows.targets.insert(rows.targets.end(), batch.targets.begin(), batch.targets.end());
    rows.ids.insert(rows.ids.end(), batch.source_rows.begin(), batch.source_rows.end());
  }
  return rows;
}

TEST(CsvStreamTest, OneShareReadsWhatReadCsvReads) {
  const std::string path = WriteTempFile("stream_same.csv", MakeCsv(500));
  StatusOr<CsvTable> table = ReadCsv(path, Options({path}).csv);
  ASSERT_TRUE(table.ok()) << table.status().message();
  // Chunks of 7 bytes: every line crosses a read.
  for (int64_t chunk : {int64_t{7}, int64_t{1} << 20}) {
    StatusOr<std::shared_ptr<const CsvFileSet>> set = CsvFileSet::Open(Options({path}, chunk));
    ASSERT_TRUE(set.ok()) << set.status().message();
    EXPECT_EQ((*set)->schema().feature_names, (std::vector<std::string>{"a", "b"}));
    const Rows rows = ReadShare(*set, 0, 1);
    EXPECT_EQ(rows.features, table->features) << "chunk " << chunk;
    EXPECT_EQ(rows.targets, table->targets) << "chunk " << chunk;
  }
}

// Every row once (in file order when the shares are concatenated, for byte ranges); each
// share reads about its own bytes only.
TEST(CsvStreamTest, SharesSplitTheRowsOnceAndReadTheirOwnBytes) {
  std::vector<std::string> one = {WriteTempFile("stream_one.csv", MakeCsv(2000))};
  std::vector<std::string> three = {WriteTempFile("stream_p0.csv", MakeCsv(700, 0)),
                                    WriteTempFile("stream_p1.csv", MakeCsv(5, 700)),
                                    WriteTempFile("stream_p2.csv", MakeCsv(1295, 705))};
  for (const auto& files : {one, three}) {
    StatusOr<std::shared_ptr<const CsvFileSet>> all = CsvFileSet::Open(Options(files));
    ASSERT_TRUE(all.ok()) << all.status().message();
    const Rows whole = ReadShare(*all, 0, 1);
    ASSERT_EQ(whole.targets.size(), 2000u);
    for (int64_t shares : {2, 3, 5, 7}) {
      Rows joined;
      for (int64_t s = 0; s < shares; ++s) {
        // A set per share, as each worker has: its own byte counter. Small chunks, so that
        // reading past a range's end would show.
        StatusOr<std::shared_ptr<const CsvFileSet>> set = CsvFileSet::Open(Options(files, 4096));
        ASSERT_TRUE(set.ok());
        const int64_t header_bytes = (*set)->bytes_read();
        const Rows part = ReadShare(*set, s, shares);
        joined.targets.insert(joined.targets.end(), part.targets.begin(), part.targets.end());
        joined.features.insert(joined.features.end(), part.features.begin(), part.features.end());
        // Its range, plus the header reads and one read past the end (4 KiB) per file.
        const int64_t limit = (*set)->total_bytes() / shares + 1 +
                              static_cast<int64_t>(files.size()) * (2 * 4096) + header_bytes;
        if (files.size() < static_cast<size_t>(shares)) {
          EXPECT_LE((*set)->bytes_read(), limit) << "share " << s << " of " << shares;
        }
      }
      if (files.size() >= static_cast<size_t>(shares)) {
        // By file: share s has files s, s + shares, ...: the same rows in another order.
        std::sort(joined.targets.begin(), joined.targets.end());
        std::vector<float> want = whole.targets;
        std::sort(want.begin(), want.end());
        EXPECT_EQ(joined.targets, want) << files.size() << " files, " << shares;
        continue;
      }
      EXPECT_EQ(joined.targets, whole.targets) << files.size() << " files, " << shares;
      EXPECT_EQ(joined.features, whole.features) << files.size() << " files, " << shares;
    }
  }
}

TEST(CsvStreamTest, PlanSharesByFileWhenThereAreEnough) {
  const auto plan = PlanShares({10, 20, 30, 40, 50}, 2);
  ASSERT_EQ(plan.size(), 2u);
  ASSERT_EQ(plan[0].size(), 3u);
  EXPECT_EQ(plan[0][1].file, 2);
  EXPECT_EQ(plan[0][1].end, 30);
  ASSERT_EQ(plan[1].size(), 2u);
  EXPECT_EQ(plan[1][0].file, 1);
  // Fewer files than shares: equal byte ranges of the concatenation.
  const auto ranges = PlanShares({10, 20}, 3);
  ASSERT_EQ(ranges[1].size(), 1u);
  EXPECT_EQ(ranges[1][0].file, 1);
  EXPECT_EQ(ranges[1][0].begin, 0);
  EXPECT_EQ(ranges[1][0].end, 10);
}

// Errors name the file and the line (its number when the reader knows it, else its byte).
TEST(CsvStreamTest, BadCellsSayWhereInEveryShare) {
  std::string text = MakeCsv(100);
  const std::string bad = "bad_cell";
  text.replace(text.find("90,"), 2, bad);  // the row of line 92
  const std::string path = WriteTempFile("stream_bad.csv", text);
  const int64_t byte = static_cast<int64_t>(text.find(bad));
  StatusOr<std::shared_ptr<const CsvFileSet>> set = CsvFileSet::Open(Options({path}));
  ASSERT_TRUE(set.ok());
  StatusOr<Dataset> first = Dataset::FromStream(std::make_shared<CsvShareStream>(*set, 0, 1));
  StatusOr<std::vector<Batch>> rows = Collect(*first);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().message(),
            path + ": line 92, column 'a' (1): 'bad_cell' is not a number");
  StatusOr<Dataset> second = Dataset::FromStream(std::make_shared<CsvShareStream>(*set, 1, 2));
  rows = Collect(*second);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().message(), path + ": the line at byte " + std::to_string(byte) +
                                         ", column 'a' (1): 'bad_cell' is not a number");
}

TEST(CsvStreamTest, FilesMustExistAndAgreeOnColumns) {
  const std::string a = WriteTempFile("stream_cols_a.csv", "a,b,y\n1,2,3\n");
  const std::string b = WriteTempFile("stream_cols_b.csv", "a,c,y\n1,2,3\n");
  StatusOr<std::shared_ptr<const CsvFileSet>> missing =
      CsvFileSet::Open(Options({a, a + ".missing"}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), a + ".missing: no such file");
  StatusOr<std::shared_ptr<const CsvFileSet>> set = CsvFileSet::Open(Options({a, b}));
  ASSERT_TRUE(set.ok());
  StatusOr<Dataset> rows = Dataset::FromStream(std::make_shared<CsvShareStream>(*set, 0, 1));
  StatusOr<std::vector<Batch>> read = Collect(*rows);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().message(), b + ": columns (a,c -> y) differ from " + a +
                                         "'s (a,b -> y): every file needs the same columns");
  StatusOr<std::vector<std::string>> none = ExpandDataFiles(a + ".nothing*");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), a + ".nothing*: no file matches");
}

// The facts workers compare: equal for equal files, different for one byte changed in the
// middle (a sampled block) and for another size; reading them costs 3 blocks of 4 KiB a file.
TEST(CsvStreamTest, TheFingerprintIsCheapAndSeesAChangedMiddle) {
  const std::string text = MakeCsv(20000);
  std::string changed = text;
  changed[changed.size() / 2 + 10] = changed[changed.size() / 2 + 10] == '1' ? '2' : '1';
  auto fingerprint = [](const std::string& path) {
    StatusOr<std::shared_ptr<const CsvFileSet>> set = CsvFileSet::Open(Options({path}));
    EXPECT_TRUE(set.ok());
    const int64_t before = (*set)->bytes_read();
    StatusOr<std::string> facts = (*set)->Fingerprint();
    EXPECT_TRUE(facts.ok());
    EXPECT_LE((*set)->bytes_read() - before, 3 * 4096);
    return *facts;
  };
  const std::string path = WriteTempFile("stream_facts.csv", text);
  const std::string first = fingerprint(path);
  EXPECT_THAT(first, ::testing::HasSubstr("1 file (" + path + " " +
                                          std::to_string(text.size()) + " bytes), columns "
                                          "(a,b -> y), sampled fnv1a64 "));
  EXPECT_EQ(fingerprint(path), first);
  WriteTempFile("stream_facts.csv", changed);
  EXPECT_NE(fingerprint(path), first);
  WriteTempFile("stream_facts.csv", text + "1,2,3\n");
  EXPECT_NE(fingerprint(path), first);
}

TEST(CsvStreamTest, ShuffleIsDeterministicPerSeedAndEpoch) {
  const std::string path = WriteTempFile("stream_shuffle.csv", MakeCsv(300));
  StatusOr<std::shared_ptr<const CsvFileSet>> set = CsvFileSet::Open(Options({path}));
  ASSERT_TRUE(set.ok());
  StatusOr<Dataset> rows = Dataset::FromStream(std::make_shared<CsvShareStream>(*set, 0, 1));
  ASSERT_TRUE(rows.ok());
  auto order = [&](int64_t buffer, int64_t epoch) {
    StatusOr<std::vector<Batch>> batches = Collect(rows->Shuffle(buffer, 42).Batch(64), epoch);
    EXPECT_TRUE(batches.ok());
    std::vector<float> targets;
    for (const Batch& batch : *batches) {
      targets.insert(targets.end(), batch.targets.begin(), batch.targets.end());
    }
    return targets;
  };
  const std::vector<float> first = order(1000, 0);
  EXPECT_EQ(order(1000, 0), first);
  EXPECT_NE(order(1000, 1), first);
  std::vector<float> sorted = first;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  ASSERT_EQ(sorted.size(), 300u);
  for (int64_t r = 0; r < 300; ++r) EXPECT_EQ(sorted[r], static_cast<float>(-r));
  EXPECT_NE(first, std::vector<float>(sorted.begin(), sorted.end()));
}

// The global batches of 16 rows of 2 shares, shares [first, end) read here.
StatusOr<Dataset> TwoShares(const std::shared_ptr<const CsvFileSet>& set, int64_t first,
                            int64_t end, int64_t buffer, uint64_t seed) {
  ShardedBatchOptions options;
  options.shares = 2;
  options.first_share = first;
  options.end_share = end;
  options.global_batch = 16;
  options.shuffle_buffer = buffer;
  options.seed = seed;
  TOWER_ASSIGN_OR_RETURN(std::shared_ptr<const ShardedBatchStream> stream,
                         ShardedBatchStream::Create(set, options));
  return Dataset::FromStream(stream);
}

// One reader of both shares builds the batches that two workers, one share each, build in
// their slots.
TEST(CsvStreamTest, GlobalBatchesDoNotDependOnWhoReadsTheShares) {
  const std::string path = WriteTempFile("stream_global.csv", MakeCsv(333));
  std::vector<int64_t> in_order;  // share 0's rows, buffer 0
  for (int64_t buffer : {0, 50}) {
    auto batches = [&](int64_t first, int64_t end) {
      StatusOr<std::shared_ptr<const CsvFileSet>> set = CsvFileSet::Open(Options({path}));
      EXPECT_TRUE(set.ok());
      StatusOr<Dataset> dataset = TwoShares(*set, first, end, buffer, 7);
      EXPECT_TRUE(dataset.ok());
      // 30 batches of 8 rows per share: past the end of a share's 166 or 167 rows (repeats).
      StatusOr<std::vector<Batch>> out = Collect(dataset->Take(30));
      EXPECT_TRUE(out.ok()) << out.status().message();
      return *out;
    };
    const std::vector<Batch> both = batches(0, 2);
    const std::vector<Batch> zero = batches(0, 1);
    const std::vector<Batch> one = batches(1, 2);
    ASSERT_EQ(both.size(), 30u);
    ASSERT_EQ(zero.size(), 30u);
    ASSERT_EQ(one.size(), 30u);
    for (size_t b = 0; b < both.size(); ++b) {
      ASSERT_EQ(both[b].rows, 16);
      for (int64_t r = 0; r < 16; ++r) {
        const Batch& worker = r < 8 ? zero[b] : one[b];
        EXPECT_EQ(both[b].targets[r], worker.targets[r]) << "batch " << b << " row " << r;
        EXPECT_EQ(both[b].features[2 * r], worker.features[2 * r]);
        EXPECT_EQ(both[b].source_rows[r], worker.source_rows[r]);
      }
    }
    // Share 0's rows, then share 1's: row 0 is file row 0 without a shuffle.
    std::vector<int64_t> share0;
    for (const Batch& batch : both) {
      share0.insert(share0.end(), batch.source_rows.begin(), batch.source_rows.begin() + 8);
    }
    if (buffer == 0) {
      EXPECT_EQ(both[0].targets[0], 0.0f);
      EXPECT_EQ(both[0].targets[7], -7.0f);
      in_order = share0;
      continue;
    }
    // A pass of the shuffled share is a permutation of the pass in file order: the share's
    // first pass ends where file order comes back to its first row.
    const size_t pass = static_cast<size_t>(
        std::find(in_order.begin() + 1, in_order.end(), in_order[0]) - in_order.begin());
    ASSERT_LT(pass, in_order.size());
    ASSERT_GT(pass, 100u);
    std::vector<int64_t> shuffled(share0.begin(), share0.begin() + pass);
    EXPECT_NE(shuffled, std::vector<int64_t>(in_order.begin(), in_order.begin() + pass));
    std::sort(shuffled.begin(), shuffled.end());
    EXPECT_EQ(shuffled, std::vector<int64_t>(in_order.begin(), in_order.begin() + pass));
  }
}

// A resumed run's fast-forward: Skip(n) finds the rows of n global batches without parsing
// them, and the batches after it are those Next() gives after n calls, bit for bit, whether
// the shares are shuffled or not, read by one worker or another, through a prefetch or not,
// across files, chunk refills and passes.
TEST(CsvStreamTest, SkipPassesTheBatchesNextWouldGive) {
  const std::string a = WriteTempFile("skip_a.csv", MakeCsv(150));
  const std::string b = WriteTempFile("skip_b.csv", MakeCsv(183, 150));
  StatusOr<std::shared_ptr<const CsvFileSet>> set = CsvFileSet::Open(Options({a, b}, 64));
  ASSERT_TRUE(set.ok()) << set.status().message();
  for (const int64_t buffer : {0, 1, 7, 50}) {
    for (const auto& [first, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {1, 2}}) {
      StatusOr<Dataset> dataset = TwoShares(*set, first, end, buffer, 11);
      ASSERT_TRUE(dataset.ok());
      StatusOr<std::vector<Batch>> all = Collect(dataset->Take(40));
      ASSERT_TRUE(all.ok()) << all.status().message();
      // 23 batches of 8 rows a share: past a share's 166 or 167 rows, into its second pass.
      for (const int64_t n : {0, 1, 5, 23, 34}) {
        for (const bool prefetch : {false, true}) {
          const std::string where = "buffer " + std::to_string(buffer) + ", shares [" +
                                    std::to_string(first) + ", " + std::to_string(end) +
                                    "), skip " + std::to_string(n) +
                                    (prefetch ? ", prefetched" : "");
          StatusOr<std::unique_ptr<Iterator>> it =
              (prefetch ? dataset->Prefetch(2) : *dataset).MakeIterator(0);
          ASSERT_TRUE(it.ok());
          StatusOr<int64_t> passed = (*it)->Skip(n);
          ASSERT_TRUE(passed.ok()) << where << ": " << passed.status().message();
          ASSERT_EQ(*passed, n) << where;
          for (int64_t k = n; k < n + 6; ++k) {
            StatusOr<std::optional<Batch>> next = (*it)->Next();
            ASSERT_TRUE(next.ok() && next->has_value()) << where;
            const Batch& want = (*all)[static_cast<size_t>(k)];
            ASSERT_EQ((*next)->source_rows, want.source_rows) << where << ", batch " << k;
            ASSERT_EQ((*next)->features, want.features) << where << ", batch " << k;
            ASSERT_EQ((*next)->targets, want.targets) << where << ", batch " << k;
          }
        }
      }
    }
  }
}

// The rows a skip passes in file order are found, not parsed: a cell that is not a number
// among them is not met (the run that trained on them would have stopped there), where
// passing them with Next() meets it.
TEST(CsvStreamTest, SkipFindsTheRowsItPassesWithoutParsingThem) {
  std::string text = MakeCsv(100);
  text.replace(text.find("\n5,") + 1, 1, "x");  // row 5's first cell: "x"
  const std::string path = WriteTempFile("skip_unparsed.csv", text);
  StatusOr<std::shared_ptr<const CsvFileSet>> set = CsvFileSet::Open(Options({path}));
  ASSERT_TRUE(set.ok());
  ShardedBatchOptions options;
  options.global_batch = 8;
  StatusOr<std::shared_ptr<const ShardedBatchStream>> stream =
      ShardedBatchStream::Create(*set, options);
  ASSERT_TRUE(stream.ok());
  StatusOr<std::unique_ptr<Iterator>> it = (*stream)->Open(0);
  ASSERT_TRUE(it.ok());
  StatusOr<int64_t> passed = (*it)->Skip(2);
  ASSERT_TRUE(passed.ok()) << passed.status().message();
  StatusOr<std::optional<Batch>> next = (*it)->Next();
  ASSERT_TRUE(next.ok() && next->has_value()) << next.status().message();
  EXPECT_EQ((*next)->targets.front(), -16.0f);
  StatusOr<std::unique_ptr<Iterator>> by_next = (*stream)->Open(0);
  ASSERT_TRUE(by_next.ok());
  EXPECT_THAT((*by_next)->Iterator::Skip(2).status().message(),
              ::testing::HasSubstr("line 7, column 'a' (1): 'x' is not a number"));
}

}  // namespace
}  // namespace tower::data
