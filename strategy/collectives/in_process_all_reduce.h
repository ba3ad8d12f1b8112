// The all-reduce of replicas whose tensors live in host memory (logical CPU devices): shared
// memory, no copies through a central device.
//
// Every replica publishes its tensors; after a barrier, replica r sums its slice of the
// tensors — laid end to end as one virtual bucket, split evenly by elements — over all
// replicas (in replica order, so every run gives the same bits) and writes the sum into
// every replica's tensor; a second barrier ends the call. A small sum (at most 2 KB per
// replica times the replica count) is checked and done whole by the last replica to arrive,
// before it opens the barrier: one meeting instead of two, the same bits. The tree sum
// (deterministic mode) works the same way, evaluating the summation tree over each slice
// (or over the whole, when small). Memory traffic: each element is read and written once
// per replica, spread over all replica threads. Handing the sums over (replicas that share
// their variables) writes none back: each block of a slice is summed into a buffer in L1
// and given to the optimizer, which updates the shared variable there.
#ifndef TOWER_STRATEGY_COLLECTIVES_IN_PROCESS_ALL_REDUCE_H_
#define TOWER_STRATEGY_COLLECTIVES_IN_PROCESS_ALL_REDUCE_H_

#include <memory>
#include <string>
#include <vector>

#include "strategy/collectives/cross_device_ops.h"
#include "strategy/collectives/replica_barrier.h"
#include "util/cache_line.h"

namespace tower {

class InProcessAllReduce : public CrossDeviceOps {
 public:
  // `replica_names[r]` names replica r in errors.
  InProcessAllReduce(std::vector<std::string> replica_names, std::chrono::milliseconds timeout,
                     bool spin);
  std::string name() const override { return "in-process"; }
  // Folded gradients (strategy/reducers/gradient_folding.h) from replicas in `groups` groups
  // (AllReduceOptions::folded with fold_groups == `groups`); set once, before the first call.
  void EnableFolding(int groups) { fold_groups_ = groups; }
  Status Broadcast(int replica, Span<Tensor* const> tensors) override;
  void Abort(const Status& reason) override { barrier_.Abort(reason); }
  void Reset() override { barrier_.Reset(); }

 private:
  // Every option: the tree sum (SumTree), else Sum with the folded and handed-over tensors.
  Status RunAllReduce(int replica, Span<Tensor* const> tensors,
                      const AllReduceOptions& options) override;
  // Hands sums over; folds once EnableFolding'd, for its group count only.
  Status CheckSupported(const AllReduceOptions& options) const override;
  // The sum of every non-tree option: the first `handed` tensors' sums go to `sink`, the
  // rest back; the first `folded` are read from the groups' first replicas only.
  Status Sum(int replica, Span<Tensor* const> tensors, size_t handed, size_t first_gradient,
             SummedGradientSink* sink, size_t folded);
  // Sums elements [begin, end) of the tensors laid end to end over every published list, in
  // replica order: the first `handed` tensors' sums to `sink`, the rest into every list.
  // The first `folded` tensors: over the lists of replicas 0 … fold_groups_ − 1 only (the
  // others' are the same tensors).
  void SumSlice(Span<Tensor* const> tensors, int64_t begin, int64_t end, size_t handed,
                size_t first_gradient, SummedGradientSink* sink, size_t folded);
  // Publishes `tensors` as replica `replica`'s list: the list, and its flat form with its
  // layout's fingerprint.
  void Publish(int replica, Span<Tensor* const> tensors);
  // Once every replica has published (Sum's last arriver before it opens the barrier, or
  // every replica after it): the lists agree, or the same error on every replica. When every
  // fingerprint is replica 0's (the usual case) the lists have one layout (shapes, dtypes,
  // host memory or not), and `replica`'s own list is checked as summable, O(tensors), not
  // every list against replica 0's, O(replicas · tensors) (what made the checks 8 % of an
  // 8-replica step), nor any Tensor object of another core. Lists that differ in their
  // fingerprints are all checked, exactly. (Two layouts with one 64-bit fingerprint would
  // let a mismatch through: a chance of 2⁻⁶⁴ per mismatch, and a mismatch is a bug of the
  // caller.)
  // With `folded`, a replica's first `folded` tensors must be its group's first replica's
  // (what folding promises; anything else would add a replica twice or never): checked for
  // `replica` alone, or with `for_all` for every replica (the last to arrive, summing the
  // lists whole for all). Either way reading any list is safe: only the groups' first
  // replicas' tensors, checked as summable, are read for folded tensors.
  Status CheckPublished(int replica, size_t folded, bool for_all) const;
  // CheckPublished's folded part: for `replica`, or every replica when it is negative.
  Status CheckFolded(int replica, size_t folded) const;
  // Checks replica `replica`'s published list against replica 0's; CheckAll: every one.
  Status CheckAgainstFirst(int replica) const;
  Status CheckAll() const;
  // Whether tensor t of replica `replica`'s list can be summed here: float32, in host memory.
  Status CheckSummable(int replica, size_t t) const;
  // The tree sum (AllReduceOptions::tree) of every replica's partial sums into its `roots`.
  Status SumTree(int replica, const PartialSums& mine, Span<Tensor* const> roots);
  // SumTree's Publish: `mine` and `roots` as replica `replica`'s contribution, and
  // their flat form (tree_lists_).
  void PublishTree(int replica, const PartialSums& mine, Span<Tensor* const> roots);
  // Once every replica has published: the contributions checked and the plan to sum them,
  // or the same error on every replica. The full check (CheckTreeContributions, which
  // reads every replica's tensors) and the plan run again only when some replica's
  // fingerprint changed since `replica`'s thread last checked; otherwise a call reads one
  // line per replica. (As for Sum, two contributions with one 64-bit fingerprint would let
  // a changed layout through unchecked: a chance of 2⁻⁶⁴ per change.)
  Status CheckTree(int replica, const SumPlan** plan);
  // Elements [begin, end) of the roots laid end to end, each evaluated along `plan` from
  // every replica's partial sums and written into every replica's root.
  void SumTreeSlice(int replica, const SumPlan& plan, Span<Tensor* const> roots, int64_t begin,
                    int64_t end);

  const std::vector<std::string> names_;
  int fold_groups_ = 0;  // EnableFolding's; 0: never folded
  ReplicaBarrier barrier_;
  // Published per replica for the current call; read by all after the first barrier.
  std::vector<Span<Tensor* const>> published_;
  // Each replica's published list as the replica summing reads it: its layout's fingerprint
  // and each tensor's data and element count, written by the replica on lines of its own.
  // Summing then fetches one chain of lines per replica (this, then its data) instead of
  // one through the Tensor objects and buffers of every tensor on another core: what made
  // a 2-float sum take 1.5 µs at 2 replicas.
  struct FlatTensor {
    float* data;  // valid once the lists are checked (float32, host memory)
    int64_t count;
  };
  struct alignas(kCacheLineBytes) FlatList {
    uint64_t fingerprint = 0;
    std::vector<FlatTensor> tensors;  // capacity kept from call to call
  };
  std::vector<FlatList> flat_;
  // Sum's check of lists the last replica to arrive found mismatched (when it would have
  // summed them whole): read by all once the barrier opens. Written only on a mismatch: it
  // shares a cache line with fields every replica reads each call, and a write every call
  // (an OK status) cost the other replicas a miss on them.
  Status decision_;
  // SumTree: each replica's partial sums and roots, and their flat form, as for Sum:
  // the contribution's fingerprint and the data pointers, written only when they change.
  std::vector<const PartialSums*> published_parts_;
  struct alignas(kCacheLineBytes) TreeList {
    uint64_t fingerprint = 0;    // TreeContributionFingerprint
    std::vector<float*> inputs;  // [node * roots + t]: node's sum of tensor t
    std::vector<float*> roots;   // [t]
  };
  std::vector<TreeList> tree_lists_;
  std::vector<TreePlanCache> plans_;
  struct alignas(kCacheLineBytes) Scratch {  // each replica thread writes its own: a line apart
    std::vector<const float*> inputs;
    std::vector<float*> outputs;
    uint64_t checked = 0;           // the fingerprints of the last call checked and planned
    const SumPlan* plan = nullptr;  // its plan (in plans_); null: none yet
  };
  std::vector<Scratch> scratch_;  // per replica thread: no allocation per call
};

}  // namespace tower

#endif  // TOWER_STRATEGY_COLLECTIVES_IN_PROCESS_ALL_REDUCE_H_
