// IndexStream: the row-level part of a pipeline, on source row indices only.
//
// Shuffle, Repeat, Take and Skip before Batch move int64 row indices, never row data: a
// batch then gathers its rows from the source in one call (data/transform_iterators.h).
// Streams hand out indices in chunks through one virtual call, so the cost per row is a few
// stores, not a call.
#ifndef TOWER_DATA_INDEX_STREAM_H_
#define TOWER_DATA_INDEX_STREAM_H_

#include <cstdint>
#include <functional>
#include <memory>

namespace tower::data {

class IndexStream {
 public:
  virtual ~IndexStream() = default;
  // Writes up to `max` (>= 1) row indices to `out` and returns how many; 0 only at the end
  // (and then on every later call).
  virtual int64_t Next(int64_t* out, int64_t max) = 0;
  // Drops the next `n` indices; returns how many it dropped (fewer only at the end). The
  // default pulls them through Next; a range skips in O(1) (resuming far into an endless
  // synthetic dataset costs nothing).
  virtual int64_t Skip(int64_t n);
};

// Builds the stream of one repetition from its iteration key.
using IndexStreamFactory = std::function<std::unique_ptr<IndexStream>(uint64_t key)>;

// 0, 1, ..., rows - 1; rows = -1: endless.
std::unique_ptr<IndexStream> MakeRangeStream(int64_t rows);

// tf.data shuffle (data/shuffle_buffer.h) with a buffer of `buffer_size` (>= 1) indices,
// drawing under `key`.
std::unique_ptr<IndexStream> MakeShuffleStream(std::unique_ptr<IndexStream> upstream,
                                               int64_t buffer_size, uint64_t key);

// `count` repetitions (-1: forever) of `factory`'s stream, keyed and ended early (on an
// empty repetition) by RepeatSchedule (data/transform_rules.h).
std::unique_ptr<IndexStream> MakeRepeatStream(IndexStreamFactory factory, int64_t count,
                                              uint64_t key, uint64_t salt);

// The first `count` indices (count >= 0).
std::unique_ptr<IndexStream> MakeTakeStream(std::unique_ptr<IndexStream> upstream, int64_t count);

// All but the first `count` indices (count >= 0).
std::unique_ptr<IndexStream> MakeSkipStream(std::unique_ptr<IndexStream> upstream, int64_t count);

}  // namespace tower::data

#endif  // TOWER_DATA_INDEX_STREAM_H_
