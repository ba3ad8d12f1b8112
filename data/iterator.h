// Iterator: one pass over a Dataset (data/dataset.h), one element at a time.
#ifndef TOWER_DATA_ITERATOR_H_
#define TOWER_DATA_ITERATOR_H_

#include <optional>

#include "data/batch.h"
#include "util/statusor.h"

namespace tower::data {

// Single consumer: call Next() from one thread at a time. An iterator owns everything it
// reads (the dataset it came from may be destroyed first).
class Iterator {
 public:
  virtual ~Iterator() = default;
  // The next batch (or, for a dataset without Batch(), a batch of one row); nullopt at the
  // end. After an error, every later call returns that same error.
  virtual StatusOr<std::optional<Batch>> Next() = 0;
};

}  // namespace tower::data

#endif  // TOWER_DATA_ITERATOR_H_
