// The rules of Repeat, Take and Skip, kept in one place for both layers that run them: the
// row-index streams (data/index_stream.h) and the element iterators
// (data/transform_iterators.h). Each layer only moves its own kind of item (chunks of int64
// row indices, or whole elements with errors) and asks these classes what to do, so a
// pipeline cuts and keys its passes the same way whichever layer runs an operation.
// (Shuffle's rule lives with its buffer, data/shuffle_buffer.h.)
#ifndef TOWER_DATA_TRANSFORM_RULES_H_
#define TOWER_DATA_TRANSFORM_RULES_H_

#include <algorithm>
#include <cstdint>
#include <limits>
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

// Take and Skip as one rule: the upstream items (row indices, or elements) at positions
// [begin, end) of a pass pass through, counting positions from 0. Take(n) is [0, n); Skip(n)
// is [n, kUnbounded). The caller drops ToDrop() items first, asks Allow() before each pull,
// tells Advance() how many items upstream gave or dropped, and UpstreamEnded() once it had
// none.
class PositionWindow {
 public:
  static constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

  static PositionWindow Take(int64_t count) { return PositionWindow(0, count); }
  static PositionWindow Skip(int64_t count) { return PositionWindow(count, kUnbounded); }

  // Items to drop before the next one may pass (0 once the window has begun).
  int64_t ToDrop() const { return std::max<int64_t>(0, begin_ - position_); }
  // How many of `wanted` items may pass now (0: the window is over).
  int64_t Allow(int64_t wanted) const { return std::min(wanted, end_ - position_); }
  // Upstream gave (or dropped) `n` more items.
  void Advance(int64_t n) { position_ += n; }
  // Upstream has no more: nothing is left to drop or to pass.
  void UpstreamEnded() { begin_ = end_ = position_; }

 private:
  PositionWindow(int64_t begin, int64_t end) : begin_(begin), end_(end) {}

  int64_t begin_;
  int64_t end_;
  int64_t position_ = 0;
};

}  // namespace tower::data

#endif  // TOWER_DATA_TRANSFORM_RULES_H_
