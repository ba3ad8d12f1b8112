// TreeGradientReducer: how a strategy in deterministic mode sums one replica's gradients
// (strategy/summation_tree.h). The replica runs one forward/backward pass per virtual shard
// it owns; after each pass, every gradient (and the loss) joins a stack of partial sums
// where two siblings of the tree are added the moment both exist, so that after the last
// pass the replica holds exactly the largest subtrees of its leaves. The cross-device path
// then combines every replica's subtrees into the root (CrossDeviceOps::AllReduceTree), in
// buckets of about `bucket_bytes` during the last pass's backward, as BucketedGradientReducer
// does: the bucket size changes when sums are sent, never what is added to what.
#ifndef TOWER_STRATEGY_TREE_GRADIENT_REDUCER_H_
#define TOWER_STRATEGY_TREE_GRADIENT_REDUCER_H_

#include <cstdint>
#include <vector>

#include "model/distribution.h"
#include "strategy/cross_device_ops.h"
#include "strategy/summation_tree.h"

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
  // A tensor's partial sums so far this step: tree nodes in leaf order with their values.
  struct Stack {
    std::vector<TreeNode> nodes;
    std::vector<Tensor> values;
  };
  // Pushes the current leaf's value and adds siblings while the top two are siblings.
  Status Push(Stack& stack, const Tensor& value);
  // Sums stacks [first, first + count) (gradients, then extras) into `roots`.
  Status Reduce(size_t first, size_t count, Span<Tensor* const> roots);
  bool last_pass() const { return pass_ + 1 == leaves_.leaves(); }

  CrossDeviceOps* const ops_;
  const int replica_;
  const int64_t bucket_bytes_;
  const int num_leaves_;
  const TreeNode leaves_;
  std::vector<int64_t> sizes_;       // the announced gradient sizes, in bytes
  std::vector<size_t> bucket_ends_;  // PlanBuckets(sizes_)
  int pass_ = -1;                    // the pass under way; -1: none
  bool in_pass_ = false;
  size_t next_ = 0;                  // gradients added in this pass
  size_t bucket_ = 0;                // the open bucket (last pass)
  size_t num_extras_ = 0;            // extras per pass (set by the first pass's Finish)
  std::vector<Stack> stacks_;        // one per gradient, then one per extra
  std::vector<Tensor*> pending_;     // the open bucket's tensors of the last pass
  PartialSums sums_;                 // scratch for Reduce
};

}  // namespace tower

#endif  // TOWER_STRATEGY_TREE_GRADIENT_REDUCER_H_
