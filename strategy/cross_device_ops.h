// CrossDeviceOps: how the replicas of one process sum their tensors (TensorFlow's
// cross_device_ops). One interface, several paths; a strategy picks one when it is built
// (strategy/cross_device_ops_selection.h) and logs why.
//
// Every method is a collective: each local replica calls it from its own thread with its
// own tensors — the same number, shapes and dtypes, in the same order — and on return each
// replica's tensors hold the result. A failure anywhere (a mismatch, a device error, a
// replica that aborted or never came) returns an error on every replica; nobody is left
// waiting.
#ifndef TOWER_STRATEGY_CROSS_DEVICE_OPS_H_
#define TOWER_STRATEGY_CROSS_DEVICE_OPS_H_

#include <string>
#include <vector>

#include "strategy/step/distribution.h"
#include "ops/tensor.h"
#include "strategy/summation_tree.h"
#include "util/span.h"
#include "util/status.h"

namespace tower {

// One replica's share of a tree all-reduce (deterministic mode, strategy/summation_tree.h):
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

class CrossDeviceOps {
 public:
  virtual ~CrossDeviceOps() = default;
  // "in-process", "same-card", "nccl", "to-cpu".
  virtual std::string name() const = 0;
  // Sums each tensor over the replicas, in place; every replica ends with the same bits.
  virtual Status AllReduceSum(int replica, Span<Tensor* const> tensors) = 0;
  // Whether AllReduceSumHandingOver works on this path (the in-process all-reduce).
  virtual bool CanHandOverSums() const { return false; }
  // AllReduceSum, except that the sums of the first `handed` tensors are not written back:
  // each slice of them goes to `sink` once, tensor k as gradient `first_gradient` + k, from
  // whichever replica sums it (the same bits AllReduceSum would write). The rest of the
  // tensors are summed in place. `sink` may differ per replica but must do the same.
  virtual Status AllReduceSumHandingOver(int replica, Span<Tensor* const> tensors,
                                         size_t handed, size_t first_gradient,
                                         SummedGradientSink* sink) {
    return UnimplementedError("the " + name() + " all-reduce cannot hand sums over");
  }
  // Whether AllReduceSumFolded works on this path, for replicas folded into `groups` groups
  // (strategy/gradient_folding.h; the in-process all-reduce once EnableFolding'd).
  virtual bool CanFold(int groups) const { return false; }
  // AllReduceSumHandingOver (AllReduceSum with `handed` 0) where the first `folded` tensors
  // are the gradients of folded replicas: every replica of a group passes its group's
  // running sums there (the same tensors as the group's first replica), so they are read
  // once per group, from replicas 0 … groups − 1, and summed in that order. The rest (the
  // extras: each replica's loss) are summed over every replica as usual.
  virtual Status AllReduceSumFolded(int replica, Span<Tensor* const> tensors, size_t folded,
                                    size_t handed, size_t first_gradient,
                                    SummedGradientSink* sink) {
    return UnimplementedError("the " + name() + " all-reduce cannot sum folded gradients");
  }
  // The sums of a fixed tree (deterministic mode): the partial sums of every replica (of
  // every process: together they hold each leaf once) are combined along the tree of
  // strategy/summation_tree.h, and every replica gets each tensor's root in `roots` (which
  // may be among its own partial sums). The bits depend on the tree alone: not on the
  // replica count, the process count or the path. Every path has it.
  virtual Status AllReduceTree(int replica, const PartialSums& mine,
                               Span<Tensor* const> roots) = 0;
  // Overwrites every replica's tensors with replica 0's.
  virtual Status Broadcast(int replica, Span<Tensor* const> tensors) = 0;
  // Orders `replica`'s later device work after every AllReduceSum it started (paths that
  // reduce asynchronously on a stream of their own). Not a collective.
  virtual Status FinishReductions(int replica) { return OkStatus(); }
  // Bytes this process's all-reduces have sent to other processes so far (0 in one process).
  virtual int64_t bytes_sent_to_other_workers() const { return 0; }
  // Makes every current and future collective fail with `reason` until Reset (called by the
  // strategy when a replica fails, so the others do not wait for it).
  virtual void Abort(const Status& reason) = 0;
  virtual void Reset() = 0;
};

// For implementations of AllReduceTree.
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

#endif  // TOWER_STRATEGY_CROSS_DEVICE_OPS_H_
