// GradientFolding: replicas that share a thread add their gradients into one running sum.
//
// Host replicas that outnumber their threads run as fibers, replica r on thread r % G (G
// threads, ReplicaScheduler). Without folding each replica fills its own gradient buffers
// and the all-reduce reads R of them: with 4 replicas of `mlp` on 2 cores, 4 × 5.25 MiB of
// gradients beside the weights and activations, close to the 32 MiB L3. With folding, the
// replicas of thread g form group g, in replica order g, g + G, g + 2G, …: the first makes
// its gradients as usual, each later one adds its own into them (Dense's kernel by the
// product itself, ops::MatMulAddInto, with no zeroed buffer; others by an add), and the
// all-reduce reads one list per group. Memory and the sums' reads shrink by R / G.
//
// The bits: a group's sum is (g_g + g_{g+G}) + g_{g+2G} …, each addition in that order (a
// member waits, yielding, until the member before it has added gradient i before it adds
// its own; a product added in place adds its depth blocks one after the other, a fixed
// order too), and the all-reduce adds the group sums in group order. So the bits depend on the
// replicas and the threads, never on timing: run to run they are the same. They differ from
// a thread per replica's (every replica's gradients added in replica order), which is what
// MirroredStrategyOptions::fold_replica_gradients = false keeps, and from deterministic mode
// (virtual shards), which never folds.
//
// A group's state is touched by the fibers of its thread only, except for StartRun (the
// caller, between runs) and Abort: a replica that failed stops the waits of every other.
#ifndef TOWER_STRATEGY_REDUCERS_GRADIENT_FOLDING_H_
#define TOWER_STRATEGY_REDUCERS_GRADIENT_FOLDING_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ops/tensor.h"
#include "util/cache_line.h"
#include "util/round_robin.h"
#include "util/span.h"
#include "util/status.h"

namespace tower {

class GradientFolding {
 public:
  // `replicas` replicas in `groups` groups (1 <= groups < replicas): replica r in group
  // r % groups: the replica threads' deal (util/round_robin.h), one group per thread.
  GradientFolding(int replicas, int groups);

  // Steps with more gradients than this are not folded (a count must fit its field).
  static constexpr size_t kMaxGradients = (size_t{1} << 24) - 1;
  // Whether a step of `gradients` gradients in `passes` passes folds: one pass (gradient
  // accumulation keeps each replica's own gradients), and a count that fits its field.
  static bool FoldsStep(size_t gradients, int passes) {
    return passes == 1 && gradients > 0 && gradients <= kMaxGradients;
  }

  int groups() const { return deal_.owners(); }
  // A run of the replicas starts (MirroredStrategy::RunOnReplicas, before any replica runs).
  void StartRun() { ++run_; }
  uint64_t run() const { return run_; }
  // The generation of a replica's `begins`-th pass of the current run (0-based): the same on
  // every replica that got as far, and different from the generation any replica can have
  // been at since (the run's number and the pass's, both modulo their fields: replicas are
  // never a run or a pass apart).
  uint64_t Generation(uint64_t begins) const {
    return ((run_ << kBeginBits) | (begins & kBeginMask)) & kGenerationMask;
  }
  int group_of(int replica) const { return deal_.owner_of(replica); }
  // A group's first replica makes the gradients the others add into.
  bool leads(int replica) const { return deal_.first_of_owner(replica); }

  // Replica `replica`'s gradient `index` (0-based, in backward order) of its step
  // `generation` is final in its group's sum: for a leader, `sum` is that sum (the tensor the
  // leader passes to the all-reduce; it must live until the step's last sum). Wakes the next
  // member's wait.
  void Publish(int replica, uint64_t generation, size_t index, Tensor* sum);
  // For a member: waits (yielding to the other fibers of its thread) until the member before
  // it in its group has made final its gradients [0, count) of step `generation`, then
  // returns the group's running sums from `first` on: valid until the caller next yields
  // its thread (take handles on them). Aborted once a replica failed.
  StatusOr<Span<Tensor* const>> WaitForSums(int replica, uint64_t generation, size_t first,
                                            size_t count);

  // A replica failed: every wait returns its error. Reset: the next run starts clean.
  void Abort(const Status& reason);
  void Reset();

 private:
  static constexpr int kBeginBits = 12;
  static constexpr uint64_t kBeginMask = (uint64_t{1} << kBeginBits) - 1;
  static constexpr int kCountBits = 24;  // gradients per step, at most 16 M
  static constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
  static constexpr uint64_t kGenerationMask = (uint64_t{1} << (64 - kCountBits)) - 1;
  // What a replica has made final in its group's sums: (generation << kCountBits) | count.
  // A waiter compares the generation for equality (the fields wrap) and the count for
  // order.
  struct alignas(kCacheLineBytes) Progress {
    std::atomic<uint64_t> word{0};
  };
  struct alignas(kCacheLineBytes) Group {
    std::vector<Tensor*> sums;  // the leader's gradient tensors, by index; capacity kept
  };
  static uint64_t Word(uint64_t generation, size_t count) {
    return (generation << kCountBits) | static_cast<uint64_t>(count);
  }

  const RoundRobin deal_;  // replicas dealt to groups as the scheduler deals them to threads
  uint64_t run_ = 0;  // written between runs only
  std::vector<Progress> progress_;  // per replica
  std::vector<Group> group_;        // per group
  std::mutex abort_mu_;  // one Abort writes the reason
  std::atomic<bool> aborted_{false};
  Status reason_;  // written once, before aborted_ is set
};

}  // namespace tower

#endif  // TOWER_STRATEGY_REDUCERS_GRADIENT_FOLDING_H_
