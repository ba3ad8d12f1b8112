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
#include <optional>
#include <string>
#include <vector>

#include "data/csv.h"
#include "data/stream.h"
#include "util/statusor.h"

namespace tower::data {

class CsvShareIterator;

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
  // Open's iterator, as a CsvShareIterator (below).
  StatusOr<std::unique_ptr<CsvShareIterator>> OpenShare() const;
  std::string DescribeRow(int64_t source_row) const override;
  std::string DebugString() const override;

 private:
  std::shared_ptr<const CsvFileSet> files_;
  int64_t share_;
  int64_t shares_;
  int64_t rows_per_element_;
};

// A share's rows (CsvShareStream::OpenShare), which can also be found without parsing them:
// a resumed run's fast-forward needs only where its rows are (ShardedBatchStream's Skip).
class CsvShareIterator : public Iterator {
 public:
  // The next rows, at most `max_rows` of them, as Next() would give them, but found and not
  // parsed: the batch holds `rows` and `source_rows` only (no features, no targets). nullopt
  // at the end of the share. A line that is blank before the file's end is still an error;
  // a cell that is not a number is not seen.
  virtual StatusOr<std::optional<Batch>> NextUnparsed(int64_t max_rows) = 0;
};

// Rows read by where they are (their Batch::source_rows ids, StreamRowId): each line read
// at its byte and parsed as its file's reader parses it (the file's header read once; each
// file kept open). For the rows a fast-forward leaves in a shuffle buffer.
class CsvRowReader {
 public:
  explicit CsvRowReader(std::shared_ptr<const CsvFileSet> files);
  ~CsvRowReader();
  CsvRowReader(const CsvRowReader&) = delete;
  CsvRowReader& operator=(const CsvRowReader&) = delete;

  // Parses the row `source_row` into features [feature_dim] and targets [target_dim]; its
  // errors name the file and "the line at byte B".
  Status Read(int64_t source_row, float* features, float* targets);

 private:
  struct OpenFile;
  std::shared_ptr<const CsvFileSet> files_;
  std::vector<std::unique_ptr<OpenFile>> open_;  // by file index; null until read
};

}  // namespace tower::data

#endif  // TOWER_DATA_CSV_STREAM_H_
