// ShuffleBuffer<T>: tf.data's shuffle buffer, for row indices and for whole elements alike.
//
// The buffer holds up to `capacity` elements. Each output is drawn uniformly from the buffer
// after it has been topped up from upstream, and its slot is filled by the last element. With
// capacity 1 the order is unchanged; with capacity >= the element count the output is a
// uniform permutation. The caller moves the elements: before each Pop it Pushes while
// WantsMore(), and calls UpstreamEnded() when upstream has none left; the buffer decides when
// to pull and when to draw. So both users (index streams and element iterators) draw the same
// random numbers over the same contents, and a pipeline gives the same order whichever one
// runs it.
#ifndef TOWER_DATA_SHUFFLE_BUFFER_H_
#define TOWER_DATA_SHUFFLE_BUFFER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "data/random.h"

namespace tower::data {

template <typename T>
class ShuffleBuffer {
 public:
  ShuffleBuffer(int64_t capacity, uint64_t key) : capacity_(capacity), random_(key) {}

  bool full() const { return static_cast<int64_t>(items_.size()) >= capacity_; }
  bool empty() const { return items_.empty(); }
  int64_t size() const { return static_cast<int64_t>(items_.size()); }

  // Whether to Push another upstream element before the next Pop: there is room and upstream
  // has not ended. When it turns false with empty(), the shuffle is over.
  bool WantsMore() const { return !upstream_ended_ && !full(); }
  void UpstreamEnded() { upstream_ended_ = true; }

  // Room for `n` more without reallocating (callers that know the element count).
  void Reserve(int64_t n) { items_.reserve(static_cast<size_t>(n)); }
  void Push(T item) { items_.push_back(std::move(item)); }

  // Removes and returns a uniformly chosen element; not empty().
  T Pop() {
    const size_t chosen = static_cast<size_t>(random_.Below(items_.size()));
    T out = std::move(items_[chosen]);
    if (chosen + 1 != items_.size()) items_[chosen] = std::move(items_.back());
    items_.pop_back();
    return out;
  }

 private:
  int64_t capacity_;
  RandomStream random_;
  std::vector<T> items_;
  bool upstream_ended_ = false;
};

}  // namespace tower::data

#endif  // TOWER_DATA_SHUFFLE_BUFFER_H_
