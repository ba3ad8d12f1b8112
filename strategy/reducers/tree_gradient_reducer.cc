#include "strategy/reducers/tree_gradient_reducer.h"

#include <algorithm>
#include <string>

#include "ops/math_ops.h"
#include "util/check.h"
#include "strategy/reducers/gradient_reducer.h"

namespace tower {

TreeGradientReducer::TreeGradientReducer(CrossDeviceOps* ops, int replica, int64_t bucket_bytes,
                                         int num_leaves, TreeNode leaves)
    : ops_(ops),
      replica_(replica),
      num_leaves_(num_leaves),
      leaves_(leaves),
      subtrees_(CoverNodes(num_leaves, leaves.first, leaves.end)),
      buckets_(bucket_bytes) {
  std::vector<TreeNode> single;
  for (int leaf = leaves.first; leaf < leaves.end; ++leaf) single.push_back({leaf, leaf + 1});
  StatusOr<SumPlan> plan = PlanSums(num_leaves, single, subtrees_);
  TOWER_CHECK_OK(plan.status());  // the cover of a range is formed from its leaves
  plan_ = std::move(*plan);
}

Status TreeGradientReducer::Begin(Span<const int64_t> gradient_bytes, int pass, int passes) {
  if (passes != leaves_.leaves()) {
    return FailedPreconditionError(
        "deterministic mode: this replica computes " + std::to_string(leaves_.leaves()) +
        " virtual shards per step (" + leaves_.ToString() + " of " +
        std::to_string(num_leaves_) + "), one pass each, but the step runs " +
        std::to_string(passes) + " pass(es); a custom training loop (ComputeGradients, "
        "ApplyGradients) runs one per replica: train with Fit, or give the strategy as many "
        "virtual shards as replicas");
  }
  if (pass != 0 && (in_pass_ || pass != pass_ + 1)) {
    return FailedPreconditionError("gradient reducer: pass " + std::to_string(pass) +
                                   " began after pass " + std::to_string(pass_) +
                                   (in_pass_ ? " (unfinished)" : ""));
  }
  TOWER_RETURN_IF_ERROR(buckets_.Start(gradient_bytes, /*must_match=*/pass != 0));
  if (pass == 0) {
    leaf_values_.resize(gradient_bytes.size());
    for (auto& values : leaf_values_) values.clear();
  }
  pass_ = pass;
  in_pass_ = true;
  return OkStatus();
}

Status TreeGradientReducer::FormSubtrees(size_t index, const Tensor& last) {
  std::vector<Tensor>& leaves = leaf_values_[index];
  leaves.push_back(last);
  if (subtree_values_.size() <= index) subtree_values_.resize(index + 1);
  std::vector<Tensor>& subtrees = subtree_values_[index];
  subtrees.resize(subtrees_.size());
  const bool host = last.device()->stream().host_addressable();
  std::vector<const float*>& inputs = input_scratch_;
  std::vector<float*>& outputs = output_scratch_;
  inputs.clear();
  outputs.clear();
  for (size_t k = 0; k < subtrees_.size(); ++k) {
    const TreeNode& node = subtrees_[k];
    if (node.leaves() == 1) {
      subtrees[k] = leaves[node.first - leaves_.first];
      outputs.push_back(nullptr);
      continue;
    }
    if (!host) continue;
    if (k + 1 == subtrees_.size()) {
      // The last subtree holds the last leaf: formed in that leaf's own buffer (RunSumPlan
      // reads a block whole before writing it), which is where the root goes after the
      // all-reduce: one replica alone then has nothing left to copy.
      subtrees[k] = last;
      outputs.push_back(last.data<float>());
      continue;
    }
    if (!subtrees[k].valid() || subtrees[k].shape() != last.shape() ||
        subtrees[k].device() != last.device() || subtrees[k].dtype() != last.dtype()) {
      TOWER_ASSIGN_OR_RETURN(subtrees[k], Tensor::Empty(last.device(), last.shape()));
    }
    outputs.push_back(subtrees[k].data<float>());
  }
  if (host) {
    // One pass over memory for every level (RunSumPlan keeps a block's sums in cache); the
    // single-leaf subtrees' outputs are that leaf itself.
    for (const Tensor& leaf : leaves) inputs.push_back(leaf.data<float>());
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (outputs[k] == nullptr) outputs[k] = const_cast<float*>(inputs[subtrees_[k].first -
                                                                        leaves_.first]);
    }
    RunSumPlan(plan_, inputs.data(), outputs.data(), 1, 0, last.num_elements());
    return OkStatus();
  }
  // Device memory: the same plan, one addition at a time on the device.
  std::vector<Tensor> slots(leaves.begin(), leaves.end());
  slots.resize(plan_.num_slots);
  for (const SumPlan::Step& step : plan_.steps) {
    TOWER_ASSIGN_OR_RETURN(slots[step.out], ops::Add(slots[step.a], slots[step.b]));
  }
  for (size_t k = 0; k < subtrees_.size(); ++k) subtrees[k] = slots[plan_.outputs[k]];
  return OkStatus();
}

Status TreeGradientReducer::Reduce(size_t first, size_t count, Span<Tensor* const> roots) {
  sums_.num_leaves = num_leaves_;
  sums_.nodes = subtrees_;
  sums_.values.resize(subtrees_.size());
  for (size_t k = 0; k < subtrees_.size(); ++k) {
    sums_.values[k].clear();
    for (size_t i = first; i < first + count; ++i) {
      sums_.values[k].push_back(&subtree_values_[i][k]);
    }
  }
  return SumBucketRecorded(replica_, buckets_.bucket(), roots, [&]() -> Status {
    return ops_->AllReduce(replica_, roots, AllReduceOptions::Tree(sums_));
  });
}

Status TreeGradientReducer::Add(Tensor* gradient) {
  if (!in_pass_) return FailedPreconditionError("gradient reducer: Add outside a pass");
  const size_t index = buckets_.added();
  TOWER_RETURN_IF_ERROR(buckets_.Next(*gradient));
  if (!last_pass()) {
    leaf_values_[index].push_back(*gradient);
    return OkStatus();
  }
  TOWER_RETURN_IF_ERROR(FormSubtrees(index, *gradient));
  // A full bucket is summed now, except the last (Finish adds the extras to it).
  if (buckets_.JoinBucket(gradient)) {
    std::vector<Tensor*>& pending = buckets_.pending();
    TOWER_RETURN_IF_ERROR(Reduce(buckets_.added() - pending.size(), pending.size(), pending));
    buckets_.Sent();
  }
  return OkStatus();
}

Status TreeGradientReducer::Finish(Span<Tensor* const> extra) {
  if (!in_pass_) return FailedPreconditionError("gradient reducer: Finish outside a pass");
  in_pass_ = false;
  TOWER_RETURN_IF_ERROR(buckets_.CheckComplete("pass"));
  const size_t gradients = buckets_.sizes().size();
  if (pass_ == 0) {
    num_extras_ = extra.size();
    leaf_values_.resize(gradients + num_extras_);
    for (size_t e = 0; e < num_extras_; ++e) leaf_values_[gradients + e].clear();
  } else if (extra.size() != num_extras_) {
    return InvalidArgumentError("gradient reducer: pass " + std::to_string(pass_) + " gives " +
                                std::to_string(extra.size()) + " extra tensors, pass 0 gave " +
                                std::to_string(num_extras_));
  }
  for (size_t e = 0; e < extra.size(); ++e) {
    if (last_pass()) {
      TOWER_RETURN_IF_ERROR(FormSubtrees(gradients + e, *extra[e]));
    } else {
      leaf_values_[gradients + e].push_back(*extra[e]);
    }
  }
  if (!last_pass()) return OkStatus();
  std::vector<Tensor*>& pending = buckets_.pending();
  const size_t in_bucket = pending.size();
  for (Tensor* tensor : extra) pending.push_back(tensor);
  if (!pending.empty()) {
    TOWER_RETURN_IF_ERROR(Reduce(gradients - in_bucket, pending.size(), pending));
  }
  pending.clear();
  pass_ = -1;
  // The step's leaves go back to the allocator now, as in a step without virtual shards
  // (kept, they would double the memory the next step touches); the subtree buffers stay.
  for (size_t i = 0; i < leaf_values_.size(); ++i) {
    leaf_values_[i].clear();
    for (size_t k = 0; i < subtree_values_.size() && k < subtree_values_[i].size(); ++k) {
      if (subtrees_[k].leaves() == 1 || k + 1 == subtrees_.size()) subtree_values_[i][k] = Tensor();
    }
  }
  return ops_->FinishReductions(replica_);
}

}  // namespace tower
