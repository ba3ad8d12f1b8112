// Global batches of CSV shares for data-parallel training: each worker reads only its shares
// (data/csv_stream.h) and builds the global batches every worker would build.
//
// Each share is read pass after pass without end (tf.data's shuffle().repeat()): with a
// shuffle buffer of B rows, pass p of share s goes through a ShuffleBuffer
// (data/shuffle_buffer.h) of B rows keyed by (seed, s, the iteration key, p), drained at the
// pass's end; the rows wait in one flat array of B rows (no allocation per row). The
// share's rows are cut into local batches of global_batch / shares rows across passes, and
// global batch b is the concatenation of every share's b-th local batch, share 0 first. A
// worker reads only its shares and leaves the other slots zero (its replicas never read
// them): so one process reading all shares and N workers reading one each build the same rows
// in the same places, and --deterministic gives the same bytes. Memory: a chunk per share
// reader (CsvStreamOptions::chunk_bytes) plus B rows per share.
//
// Exact resume fast-forwards: the batches are a function of (files, shares, seed, buffer), so
// a resumed run passes the batches before its position with Skip, which finds their rows'
// lines without parsing them (the shuffle buffers driven by row ids alone) and parses only
// the rows the buffers hold at the position, by where they are.
#ifndef TOWER_DATA_CSV_SHARDS_H_
#define TOWER_DATA_CSV_SHARDS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "data/csv_stream.h"
#include "data/stream.h"
#include "util/statusor.h"

namespace tower::data {

struct ShardedBatchOptions {
  int64_t shares = 1;
  int64_t first_share = 0;  // this worker's shares: [first_share, end_share)
  int64_t end_share = 1;
  int64_t global_batch = 1;    // a multiple of shares
  int64_t shuffle_buffer = 0;  // rows per share's buffer; 0: file order
  uint64_t seed = 0;
  // > 0: every target of this worker's rows must be a class id in [0, class_count), checked
  // as they are read (the error names the file and the line's byte).
  int64_t class_count = 0;
};

// The endless global batches (see the design above).
class ShardedBatchStream final : public ElementStream {
 public:
  static StatusOr<std::shared_ptr<const ShardedBatchStream>> Create(
      std::shared_ptr<const CsvFileSet> files, const ShardedBatchOptions& options);

  const Schema& schema() const override { return files_->schema(); }
  int64_t batch_size() const override { return options_.global_batch; }
  StatusOr<std::unique_ptr<Iterator>> Open(uint64_t key) const override;
  std::string DescribeRow(int64_t source_row) const override;
  std::string DebugString() const override;

 private:
  ShardedBatchStream(std::shared_ptr<const CsvFileSet> files, const ShardedBatchOptions& options)
      : files_(std::move(files)), options_(options) {}
  std::shared_ptr<const CsvFileSet> files_;
  ShardedBatchOptions options_;
};

}  // namespace tower::data

#endif  // TOWER_DATA_CSV_SHARDS_H_
