// Prefetch: run an iterator on a background thread, `buffer_size` elements ahead.
//
// The producer thread calls upstream->Next() and puts each result (element, end or error)
// into a bounded queue; Next() takes them out in order, so an upstream error arrives exactly
// where it happened in the sequence. Destroying the iterator mid-stream stops the producer
// (after the upstream call it is in, if any) and joins it. Skip() stops the producer, passes
// what it queued, leaves the rest to the upstream's own Skip (fast where the upstream can skip
// without reading: a resumed run's fast-forward) and starts it again.
#ifndef TOWER_DATA_PREFETCH_H_
#define TOWER_DATA_PREFETCH_H_

#include <cstdint>
#include <memory>

#include "data/iterator.h"

namespace tower::data {

// buffer_size >= 1. Unavailable if the thread cannot be started.
StatusOr<std::unique_ptr<Iterator>> MakePrefetchIterator(std::unique_ptr<Iterator> upstream,
                                                         int64_t buffer_size);

}  // namespace tower::data

#endif  // TOWER_DATA_PREFETCH_H_
