// Iterator: one pass over a Dataset (data/dataset.h), one element at a time.
#ifndef TOWER_DATA_ITERATOR_H_
#define TOWER_DATA_ITERATOR_H_

#include <cstdint>
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

  // Advances past the next `n` elements with rows (empty ones are passed and not counted),
  // as calls of Next() would, and returns how many it passed: fewer than `n` only at the end.
  // Iterators that can find where their elements end without building them override it (a
  // resumed run's fast-forward); the result is the same either way.
  virtual StatusOr<int64_t> Skip(int64_t n) {
    int64_t passed = 0;
    while (passed < n) {
      TOWER_ASSIGN_OR_RETURN(std::optional<Batch> element, Next());
      if (!element.has_value()) break;
      if (element->rows > 0) ++passed;
    }
    return passed;
  }
};

}  // namespace tower::data

#endif  // TOWER_DATA_ITERATOR_H_
