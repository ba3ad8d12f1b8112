// CrossDeviceOps: how the replicas of one process sum their tensors (TensorFlow's
// cross_device_ops). One interface, several paths; a strategy picks one when it is built
// (strategy/collectives/cross_device_ops_selection.h) and logs why.
//
// AllReduce and Broadcast are collectives: each local replica calls them from its own thread
// with its own tensors — the same number, shapes and dtypes, in the same order — and on
// return each replica's tensors hold the result. A failure anywhere (a mismatch, a device
// error, a replica that aborted or never came) returns an error on every replica; nobody is
// left waiting.
#ifndef TOWER_STRATEGY_COLLECTIVES_CROSS_DEVICE_OPS_H_
#define TOWER_STRATEGY_COLLECTIVES_CROSS_DEVICE_OPS_H_

#include <limits>
#include <string>
#include <vector>

#include "strategy/step/distribution.h"
#include "ops/tensor.h"
#include "strategy/collectives/summation_tree.h"
#include "util/span.h"
#include "util/status.h"

namespace tower {

// One replica's share of a tree all-reduce (deterministic mode,
// strategy/collectives/summation_tree.h):
// the nodes of the tree over `num_leaves` leaves whose sums it holds, in leaf order, and
// those sums, one tensor per reduced tensor: values[k][t] is node k's sum of tensor t.
struct PartialSums {
  int num_leaves = 0;
  std::vector<TreeNode> nodes;
  std::vector<std::vector<Tensor*>> values;
};

// FNV-1a's step on 64-bit words, then a shift to spread high bits: the fingerprints below
// are taken of every bucket of every replica each step, so they must cost a few
// nanoseconds.
class Fingerprinter {
 public:
  void Mix(uint64_t value) {
    h_ = (h_ ^ value) * 1099511628211ull;
    h_ ^= h_ >> 29;
  }
  // The tensors' count, and each one's dtype, shape and whether it lives in host memory.
  void MixLayout(Span<Tensor* const> tensors);
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 1469598103934665603ull;
};

// FNV-1a over the layout of a collective's tensors: their count, and each one's dtype,
// shape and whether it lives in host memory. Equal layouts give equal fingerprints; the
// in-process all-reduce compares them between replicas, the workers before each
// cross-process all-reduce (and the flight recorder keeps them).
uint64_t TensorLayoutFingerprint(Span<Tensor* const> tensors);
// The same over one replica's share of a tree all-reduce: the leaf count, its nodes, and the
// layout of each node's tensors and of its roots: all that CheckTreeContributions and the
// sum's plan read of it. Equal for two calls, they check and plan alike.
uint64_t TreeContributionFingerprint(const PartialSums& part, Span<Tensor* const> roots);

// How one CrossDeviceOps::AllReduce call sums. The default (`{}`) is the plain sum: each
// tensor summed over the replicas, in place, every replica ending with the same bits. Every
// replica passes the same options, except `sink` and `tree`, which are its own.
//
// What each path takes (Supports answers for a path as built):
//
//   option                  in-process               to-cpu  same-card  nccl  <local>+mpi
//   plain                   yes                      yes     yes        yes   yes
//   handed, sink            yes                      no      no         no    no
//   folded, fold_groups     EnableFolding's groups   no      no         no    no
//   tree                    yes                      yes     yes        yes   yes
//
// `folded` and `handed` combine (a folding step whose sums are handed over); `tree` takes
// neither.
struct AllReduceOptions {
  // Gradient folding (strategy/reducers/gradient_folding.h): the first `folded` tensors are the
  // running sums of replicas folded into `fold_groups` groups (the path's own, set when it
  // was built: InProcessAllReduce::EnableFolding). Every replica of a group passes its
  // group's sums there (the same tensors as the group's first replica), so they are read
  // once per group, from replicas 0 … fold_groups − 1, and summed in that order. The rest
  // (the extras: each replica's loss) are summed over every replica as usual.
  size_t folded = 0;
  int fold_groups = 0;
  // Handing the sums over (replicas that share their variables): the sums of the first
  // `handed` tensors are not written back; each slice of them goes to `sink` once, tensor k
  // as gradient `first_gradient` + k (its index in the step, SummedGradientSink), from
  // whichever replica sums it (the same bits the plain sum would write). The rest are summed
  // in place. `sink` (non-null when `handed` > 0) may differ per replica but must do the
  // same.
  size_t handed = 0;
  size_t first_gradient = 0;
  SummedGradientSink* sink = nullptr;
  // Deterministic mode: this replica's partial sums of a fixed tree
  // (strategy/collectives/summation_tree.h; tree->values[k][t] is node k's sum of tensor t), and
  // `tensors` the roots, one per reduced tensor, of its partial sums' shapes. The partial
  // sums of every replica (of every process: together they hold each leaf once) are combined
  // along the tree, and every replica gets each tensor's sum in its root (which may be among
  // its own partial sums). The bits depend on the tree alone: not on the replica count, the
  // process count or the path.
  const PartialSums* tree = nullptr;

  static AllReduceOptions Folded(size_t folded, int fold_groups) {
    AllReduceOptions options;
    options.folded = folded;
    options.fold_groups = fold_groups;
    return options;
  }
  static AllReduceOptions HandOver(size_t handed, size_t first_gradient, SummedGradientSink* sink) {
    AllReduceOptions options;
    options.handed = handed;
    options.first_gradient = first_gradient;
    options.sink = sink;
    return options;
  }
  static AllReduceOptions Tree(const PartialSums& mine) {
    AllReduceOptions options;
    options.tree = &mine;
    return options;
  }
};

class CrossDeviceOps {
 public:
  virtual ~CrossDeviceOps() = default;
  // "in-process", "same-card", "nccl", "to-cpu".
  virtual std::string name() const = 0;
  // Sums each tensor over the replicas as `options` say (AllReduceOptions: by default in
  // place, every replica ending with the same bits). Options that the path does not take
  // (Supports), that contradict each other, or that name more tensors than `tensors` holds
  // are refused on each replica before it joins the collective, naming the path and the
  // option: a kind of sum the path lacks with the status code of a missing feature, the rest
  // as InvalidArgument.
  // (Not virtual, so that its default argument is one for every path: paths implement
  // RunAllReduce. The plain sum costs one branch more than a virtual call.)
  Status AllReduce(int replica, Span<Tensor* const> tensors, const AllReduceOptions& options = {}) {
    if (options.folded != 0 || options.handed != 0 || options.tree != nullptr) {
      TOWER_RETURN_IF_ERROR(CheckOptions(options, tensors.size()));
    }
    return RunAllReduce(replica, tensors, options);
  }
  // Whether AllReduce takes options of this kind on this path, as built (the counts aside:
  // each call checks them against its tensors); the capability query, e.g. for handing sums
  // over, AllReduceOptions::HandOver(1, 0, sink). Not a collective.
  bool Supports(const AllReduceOptions& options) const {
    return CheckOptions(options, std::numeric_limits<size_t>::max()).ok();
  }
  // Overwrites every replica's tensors with replica 0's.
  virtual Status Broadcast(int replica, Span<Tensor* const> tensors) = 0;
  // Orders `replica`'s later device work after every AllReduce it started (paths that
  // reduce asynchronously on a stream of their own). Not a collective.
  virtual Status FinishReductions(int replica) { return OkStatus(); }
  // Bytes this process's all-reduces have sent to other processes so far (0 in one process).
  virtual int64_t bytes_sent_to_other_workers() const { return 0; }
  // Makes every current and future collective fail with `reason` until Reset (called by the
  // strategy when a replica fails, so the others do not wait for it).
  virtual void Abort(const Status& reason) = 0;
  virtual void Reset() = 0;

 protected:
  // What an implementation provides.
  // AllReduce on this path, with options CheckOptions passed: dispatches to the path's
  // plain, handed-over, folded or tree sum.
  virtual Status RunAllReduce(int replica, Span<Tensor* const> tensors,
                              const AllReduceOptions& options) = 0;
  // The kinds of sum this path lacks, for options consistent in themselves: OkStatus, or the
  // error AllReduce returns. By default the plain and the tree sums only: handing over and
  // folding are refused as features this path lacks.
  virtual Status CheckSupported(const AllReduceOptions& options) const;

 private:
  // `options` consistent in themselves, supported here (CheckSupported), and fitting a list
  // of `tensors` tensors.
  Status CheckOptions(const AllReduceOptions& options, size_t tensors) const;
};

// For implementations of the tree sum (AllReduceOptions::tree).
// Checks every replica's partial sums and roots against replica 0's roots: the same leaf
// count, the same number of float32 tensors of the same shapes (and in host memory when
// `need_host_memory`), so that every replica reports the same mismatch, naming it.
Status CheckTreeContributions(Span<const PartialSums* const> parts,
                              Span<const Span<Tensor* const>> roots,
                              const std::vector<std::string>& names, bool need_host_memory);

// The plan from every replica's nodes (in replica order) to `outputs`, rebuilt only when
// the layout changes (it stays the same from step to step). One per thread that uses it.
class TreePlanCache {
 public:
  StatusOr<const SumPlan*> Get(int num_leaves, Span<const PartialSums* const> parts,
                               Span<const TreeNode> outputs);

 private:
  bool valid_ = false;
  int num_leaves_ = 0;
  std::vector<TreeNode> inputs_;
  std::vector<TreeNode> outputs_;
  std::vector<TreeNode> nodes_scratch_;
  SumPlan plan_;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_COLLECTIVES_CROSS_DEVICE_OPS_H_
