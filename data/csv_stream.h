// Streaming CSV: files larger than memory, read in bounded chunks, each worker reading only
// its share.
//
// Design (see data/stream.h for how streams fit Dataset):
// - CsvFileSet: the files (a list or globs, data/csv_stream.h's ExpandDataFiles), their sizes
//   and the schema of the first file's header (every file must have the same columns). Opening
//   one reads only the first header. It counts every byte its readers read (bytes_read()), so
//   a worker can say how much of the data it touched.
// - Shares (PlanShares): with at least as many files as shares, share s reads whole files
//   s, s + shares, ...; with fewer, the files' concatenation is cut into `shares` equal byte
//   ranges and a row belongs to the range where its line starts. A reader seeks to its range,
//   skips the partial line it lands in, and reads past the range's end only to finish its last
//   line, so it never parses another share's rows.
// - CsvShareStream: the rows of one share in file order (one pass per Open), parsed line by
//   line with data/csv.h's CsvLineParser (the same cell rules and messages as ReadCsv). A row's
//   Batch::source_rows entry is (file index << 40) | the line's byte offset, which
//   DescribeRow turns into "a.csv: the line at byte 1234". Parse errors say "line N" where
//   the reader knows the number (a range that starts at the file's first row), else "the
//   line at byte B": a reader mid-file does not count the lines before its range.
// - The endless global batches of training, built from shares: data/csv_shards.h.
#ifndef TOWER_DATA_CSV_STREAM_H_
#define TOWER_DATA_CSV_STREAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/csv.h"
#include "data/stream.h"
#include "util/statusor.h"

namespace tower::data {

// "a.csv,b.csv", "part-*.csv", or a mix: each item a file or a glob (its matches sorted), in
// order. NotFound names a file that does not exist or a glob that matches nothing.
StatusOr<std::vector<std::string>> ExpandDataFiles(const std::string& spec);

// Bytes [begin, end) of file `file` of a set.
struct SharePiece {
  int64_t file = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

// Each share's pieces (see the design above); shares >= 1.
std::vector<std::vector<SharePiece>> PlanShares(const std::vector<int64_t>& file_sizes,
                                                int64_t shares);

struct CsvStreamOptions {
  std::vector<std::string> files;
  CsvOptions csv;  // class_labels must be numeric ids (text labels need every row first)
  // Bytes per read (the bound on a reader's buffer, but for a line longer than it).
  int64_t chunk_bytes = 1 << 20;
};

class CsvFileSet {
 public:
  // Checks that every file exists and reads the first file's header.
  static StatusOr<std::shared_ptr<const CsvFileSet>> Open(CsvStreamOptions options);

  const CsvStreamOptions& options() const { return options_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  int64_t total_bytes() const;
  const Schema& schema() const { return schema_; }

  // Bytes read from the files so far, by every reader of the set (and the fingerprint).
  int64_t bytes_read() const { return bytes_->load(); }
  void CountRead(int64_t bytes) const { bytes_->fetch_add(bytes); }

  // What workers compare before training, cheap to know: each file's name and size, the
  // columns, and an FNV-1a hash of 3 samples of 4 KiB per file (start, middle, end).
  StatusOr<std::string> Fingerprint() const;

  // "a.csv: the line at byte 1234" for a Batch::source_rows entry.
  std::string DescribeRow(int64_t source_row) const;

 private:
  CsvFileSet() = default;
  CsvStreamOptions options_;
  std::vector<int64_t> sizes_;
  Schema schema_;
  // Shared by every reader; counting is not a change of the set's content.
  std::shared_ptr<std::atomic<int64_t>> bytes_ = std::make_shared<std::atomic<int64_t>>(0);
};

// Encoding of Batch::source_rows for streamed rows.
inline int64_t StreamRowId(int64_t file, int64_t byte) { return (file << 40) | byte; }

// The rows of share `share` of `shares`, in file order; elements are single rows, or, when
// `rows_per_element` > 0, chunks of up to that many rows (for ShardedBatchStream's unshuffled
// path, which cuts them into batches itself; Dataset operations would act on the chunks).
class CsvShareStream final : public ElementStream {
 public:
  CsvShareStream(std::shared_ptr<const CsvFileSet> files, int64_t share, int64_t shares,
                 int64_t rows_per_element = 0);

  const Schema& schema() const override { return files_->schema(); }
  int64_t batch_size() const override { return 0; }
  StatusOr<std::unique_ptr<Iterator>> Open(uint64_t key) const override;
  std::string DescribeRow(int64_t source_row) const override;
  std::string DebugString() const override;

 private:
  std::shared_ptr<const CsvFileSet> files_;
  int64_t share_;
  int64_t shares_;
  int64_t rows_per_element_;
};

}  // namespace tower::data

#endif  // TOWER_DATA_CSV_STREAM_H_
