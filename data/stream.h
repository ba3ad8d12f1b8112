// ElementStream: the bottom of a streaming Dataset pipeline, for data read front to back
// (files larger than memory) instead of a random-access Source (data/source.h).
//
// Design. A Source pipeline moves row indices and touches rows only in a batch's Read; a
// stream has no indices to move: it yields its elements in file order, once per Open. So a
// Dataset built on a stream (Dataset::FromStream) applies every operation to elements, as
// tf.data does after a reader: Shuffle(buffer, seed) is the element ShuffleBuffer
// (data/shuffle_buffer.h; deterministic for a seed and an epoch, memory = buffer elements),
// Batch concatenates one-row elements, Repeat reopens the stream under a new key, Take/Skip
// count elements and Prefetch runs the whole upstream (reading and parsing included) on a
// thread of its own. Memory then depends on the buffer sizes, never on the data's size.
//
// A stream's elements are rows (batch_size() 0: one-row Batches) or, for a stream that
// assembles them itself (data/csv_shards.h's global batches of shares), batches of
// batch_size() rows. num_elements() is -1 when the count is not known without a pass over
// the data or the stream is endless; Dataset::num_rows() is then -1 too, and a training loop
// needs a step count (tf.data's steps_per_epoch).
#ifndef TOWER_DATA_STREAM_H_
#define TOWER_DATA_STREAM_H_

#include <cstdint>
#include <memory>
#include <string>

#include "data/iterator.h"
#include "data/schema.h"
#include "util/statusor.h"

namespace tower::data {

class ElementStream {
 public:
  virtual ~ElementStream() = default;

  virtual const Schema& schema() const = 0;
  int64_t feature_dim() const { return static_cast<int64_t>(schema().feature_names.size()); }
  int64_t target_dim() const { return static_cast<int64_t>(schema().target_names.size()); }
  // 0: elements are single rows; else every element is a batch of this many rows.
  virtual int64_t batch_size() const { return 0; }
  // Elements of one pass; -1 when unknown or endless.
  virtual int64_t num_elements() const { return -1; }

  // One pass from the start. `key` is the iteration key (data/random.h) of the pass, for
  // streams that shuffle inside; the others ignore it. Safe to call from several threads; each
  // iterator owns its reading state.
  virtual StatusOr<std::unique_ptr<Iterator>> Open(uint64_t key) const = 0;

  // Where Batch::source_rows value `source_row` comes from, for messages.
  virtual std::string DescribeRow(int64_t source_row) const {
    return "row " + std::to_string(source_row);
  }
  // For Dataset::DebugString: "CsvStream(a.csv, b.csv; share 0 of 2)".
  virtual std::string DebugString() const = 0;
};

}  // namespace tower::data

#endif  // TOWER_DATA_STREAM_H_
