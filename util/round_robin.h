// RoundRobin: items dealt in turn to owners — item i to owner i % owners — and, from that one
// rule, each owner's items (o, o + owners, o + 2·owners, …) and which of them comes first (o).
//
// It is how a strategy's local replicas are dealt to its replica threads
// (strategy/runtime/replica_scheduler.h). Gradient folding's groups
// (strategy/reducers/gradient_folding.h) are
// the replicas of one thread: they must be dealt exactly as the scheduler deals them (a
// group's sum is added to by its thread alone). Batched replicas' batches
// (strategy/step/distribution.h, strategy/mirrored_strategy.cc) are dealt by the same rule over the
// batches (one by default), so that batch b's first replica is replica b, on thread b. All of
// them read the rule here rather than restate it.
#ifndef TOWER_UTIL_ROUND_ROBIN_H_
#define TOWER_UTIL_ROUND_ROBIN_H_

namespace tower {

class RoundRobin {
 public:
  // `items` items (>= 0) dealt to `owners` owners (>= 1).
  constexpr RoundRobin(int items, int owners) : items_(items), owners_(owners) {}

  constexpr int owners() const { return owners_; }
  constexpr int owner_of(int item) const { return item % owners_; }
  // Whether `item` is its owner's first (the owner's number is its first item's).
  constexpr bool first_of_owner(int item) const { return item < owners_; }
  // The item before `item` among its owner's (item - owners), or -1 for an owner's first.
  constexpr int previous_of(int item) const { return first_of_owner(item) ? -1 : item - owners_; }
  // Calls fn(item) for each of `owner`'s items, in increasing order (no allocation).
  template <typename Fn>
  void ForEachOf(int owner, Fn&& fn) const {
    for (int item = owner; item < items_; item += owners_) fn(item);
  }

 private:
  int items_;
  int owners_;
};

}  // namespace tower

#endif  // TOWER_UTIL_ROUND_ROBIN_H_
