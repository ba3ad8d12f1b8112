// Element-level iterators: the parts of a pipeline that move whole elements (batches, or
// one-row batches before Batch()).
//
// The fast path is MakeGatherIterator: row indices from an IndexStream, gathered into a
// batch with one Source::Read. The others wrap an upstream Iterator and are used after
// Batch() or Prefetch() (shuffling batches, repeating batched passes, ...). Every one keeps
// the first error it sees and returns it again on later calls.
#ifndef TOWER_DATA_TRANSFORM_ITERATORS_H_
#define TOWER_DATA_TRANSFORM_ITERATORS_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "data/index_stream.h"
#include "data/iterator.h"
#include "data/source.h"

namespace tower::data {

// Builds the iterator of one repetition from its iteration key.
using IteratorFactory = std::function<StatusOr<std::unique_ptr<Iterator>>(uint64_t key)>;

// Batches of `batch_size` rows of `source`, in the order `rows` gives; the last, partial
// batch is kept unless `drop_remainder`. batch_size 1 gives the one-row elements of an
// unbatched dataset.
std::unique_ptr<Iterator> MakeGatherIterator(std::shared_ptr<const Source> source,
                                             std::unique_ptr<IndexStream> rows,
                                             int64_t batch_size, bool drop_remainder);

// Batches of `batch_size` upstream elements, concatenated (for a Batch() that follows a
// Prefetch() of rows).
std::unique_ptr<Iterator> MakeConcatBatchIterator(std::unique_ptr<Iterator> upstream,
                                                  int64_t batch_size, bool drop_remainder);

// tf.data shuffle of elements with a buffer of `buffer_size` (data/shuffle_buffer.h).
std::unique_ptr<Iterator> MakeShuffleIterator(std::unique_ptr<Iterator> upstream,
                                              int64_t buffer_size, uint64_t key);

// `count` repetitions (-1: forever), keyed and ended early by RepeatSchedule
// (data/transform_rules.h), as MakeRepeatStream.
std::unique_ptr<Iterator> MakeRepeatIterator(IteratorFactory factory, int64_t count,
                                             uint64_t key, uint64_t salt);

// The first `count` elements, and all but the first `count` (count >= 0), cut by
// PositionWindow (data/transform_rules.h) as MakeTakeStream and MakeSkipStream.
std::unique_ptr<Iterator> MakeTakeIterator(std::unique_ptr<Iterator> upstream, int64_t count);
std::unique_ptr<Iterator> MakeSkipIterator(std::unique_ptr<Iterator> upstream, int64_t count);

}  // namespace tower::data

#endif  // TOWER_DATA_TRANSFORM_ITERATORS_H_
