// The rules of Repeat, Take and Skip, kept in one place for both layers that run them: the
// row-index streams (data/index_stream.h) and the element iterators
// (data/transform_iterators.h). Each layer only moves its own kind of item (chunks of int64
// row indices, or whole elements with errors) and asks these classes what to do, so a
// pipeline cuts and keys its passes the same way whichever layer runs an operation.
// (Shuffle's rule lives with its buffer, data/shuffle_buffer.h.)
#ifndef TOWER_DATA_TRANSFORM_RULES_H_
#define TOWER_DATA_TRANSFORM_RULES_H_

#include <cstdint>
#include <optional>

namespace tower::data {

// Repeat: how many repetitions start, the iteration key each is built with, and the early
// end on an empty repetition.
class RepeatSchedule {
 public:
  // `count` repetitions (-1: forever) of a Repeat whose iteration key is `key`; `salt` tells
  // nested Repeats apart.
  RepeatSchedule(int64_t count, uint64_t key, uint64_t salt)
      : count_(count), key_(key), salt_(salt) {}

  // The iteration key to build the next repetition with, or nullopt when the Repeat is over:
  // `count` repetitions have started, or the last one ended without producing anything (then
  // every one would, so repeating an empty dataset forever ends, as in tf.data). Repetition 0
  // gets `key` itself. Once nullopt, always nullopt.
  std::optional<uint64_t> StartNext();
  // The current repetition produced something (an element, or a chunk of indices).
  void Produced() { current_produced_ = true; }
  // The current repetition ran out.
  void Finished() { last_was_empty_ = !current_produced_; }

 private:
  int64_t count_;
  uint64_t key_;
  uint64_t salt_;
  int64_t started_ = 0;
  bool current_produced_ = false;
  bool last_was_empty_ = false;
};

}  // namespace tower::data

#endif  // TOWER_DATA_TRANSFORM_RULES_H_
