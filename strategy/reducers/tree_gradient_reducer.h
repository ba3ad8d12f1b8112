// TreeGradientReducer: how a strategy in deterministic mode sums one replica's gradients
// (strategy/collectives/summation_tree.h). The replica runs one forward/backward pass per virtual
// shard
// (leaf) it owns and the reducer keeps each pass's gradients and loss. When the last pass
// produces a gradient, its leaves are added into the largest subtrees of the replica's
// leaves in one blocked pass over memory (every level of the tree in cache: the leaves are
// read once and each subtree written once, into buffers kept from step to step), and the
// cross-device path combines every replica's subtrees into the root (CrossDeviceOps::AllReduce
// with AllReduceOptions::tree) — in buckets of about `bucket_bytes` during the last pass's
// backward, as BucketedGradientReducer does: the bucket size changes when sums are sent,
// never what is added to what.
#ifndef TOWER_STRATEGY_REDUCERS_TREE_GRADIENT_REDUCER_H_
#define TOWER_STRATEGY_REDUCERS_TREE_GRADIENT_REDUCER_H_

#include <cstdint>
#include <vector>

#include "strategy/step/distribution.h"
#include "strategy/collectives/cross_device_ops.h"
#include "strategy/reducers/gradient_reducer.h"
#include "strategy/collectives/summation_tree.h"

namespace tower {

class TreeGradientReducer : public GradientReducer {
 public:
  // Sums through `ops` as local replica `replica`, whose leaves (virtual shards) are
  // `leaves` of a tree over `num_leaves`.
  TreeGradientReducer(CrossDeviceOps* ops, int replica, int64_t bucket_bytes, int num_leaves,
                      TreeNode leaves);

  Status Begin(Span<const int64_t> gradient_bytes, int pass, int passes) override;
  Status Add(Tensor* gradient) override;
  Status Finish(Span<Tensor* const> extra) override;

 private:
  // Forms tensor `index`'s subtrees from its leaves (the last pass's value is `last`).
  Status FormSubtrees(size_t index, const Tensor& last);
  // Sums tensors [first, first + count) (gradients, then extras) into `roots`.
  Status Reduce(size_t first, size_t count, Span<Tensor* const> roots);
  bool last_pass() const { return pass_ + 1 == leaves_.leaves(); }

  CrossDeviceOps* const ops_;
  const int replica_;
  const int num_leaves_;
  const TreeNode leaves_;
  const std::vector<TreeNode> subtrees_;  // CoverNodes of leaves_
  SumPlan plan_;                          // leaves_ one by one -> subtrees_
  GradientBuckets buckets_;          // the announcement; the last pass's buckets
  int pass_ = -1;                    // the pass under way; -1: none
  bool in_pass_ = false;
  size_t num_extras_ = 0;            // extras per pass (set by the first pass's Finish)
  // Per tensor (gradients, then extras): its value in each pass so far, then its subtrees'
  // sums (a subtree of one leaf is that leaf's tensor; larger ones are buffers reused from
  // step to step when their shape stays).
  std::vector<std::vector<Tensor>> leaf_values_;
  std::vector<std::vector<Tensor>> subtree_values_;
  PartialSums sums_;                 // scratch for Reduce
  std::vector<const float*> input_scratch_;  // and for FormSubtrees
  std::vector<float*> output_scratch_;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_REDUCERS_TREE_GRADIENT_REDUCER_H_
