#include "strategy/tree_gradient_reducer.h"

#include <algorithm>
#include <string>

#include "ops/math_ops.h"
#include "strategy/gradient_reducer.h"

namespace tower {

TreeGradientReducer::TreeGradientReducer(CrossDeviceOps* ops, int replica, int64_t bucket_bytes,
                                         int num_leaves, TreeNode leaves)
    : ops_(ops),
      replica_(replica),
      bucket_bytes_(bucket_bytes),
      num_leaves_(num_leaves),
      leaves_(leaves) {}

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
  if (pass == 0) {
    if (!std::equal(gradient_bytes.begin(), gradient_bytes.end(), sizes_.begin(),
                    sizes_.end())) {
      sizes_.assign(gradient_bytes.begin(), gradient_bytes.end());
      bucket_ends_ = PlanBuckets(sizes_, bucket_bytes_);
    }
    for (Stack& stack : stacks_) {
      stack.nodes.clear();
      stack.values.clear();
    }
    stacks_.resize(sizes_.size());
  } else if (in_pass_ || pass != pass_ + 1) {
    return FailedPreconditionError("gradient reducer: pass " + std::to_string(pass) +
                                   " began after pass " + std::to_string(pass_) +
                                   (in_pass_ ? " (unfinished)" : ""));
  } else if (!std::equal(gradient_bytes.begin(), gradient_bytes.end(), sizes_.begin(),
                         sizes_.end())) {
    return InvalidArgumentError("gradient reducer: pass " + std::to_string(pass) +
                                " announced other gradient sizes than pass 0");
  }
  pass_ = pass;
  in_pass_ = true;
  next_ = 0;
  bucket_ = 0;
  pending_.clear();
  return OkStatus();
}

Status TreeGradientReducer::Push(Stack& stack, const Tensor& value) {
  const int leaf = leaves_.first + pass_;
  stack.nodes.push_back({leaf, leaf + 1});
  stack.values.push_back(value);
  while (stack.nodes.size() >= 2) {
    const size_t n = stack.nodes.size();
    const TreeNode& left = stack.nodes[n - 2];
    const TreeNode& right = stack.nodes[n - 1];
    const TreeNode parent{left.first, right.end};
    if (TreeSplit(parent) != left.end || !IsTreeNode(num_leaves_, parent)) break;
    TOWER_ASSIGN_OR_RETURN(Tensor sum, ops::Add(stack.values[n - 2], stack.values[n - 1]));
    stack.nodes.resize(n - 2);
    stack.values.resize(n - 2);
    stack.nodes.push_back(parent);
    stack.values.push_back(std::move(sum));
  }
  return OkStatus();
}

Status TreeGradientReducer::Reduce(size_t first, size_t count, Span<Tensor* const> roots) {
  const std::vector<TreeNode>& nodes = stacks_[first].nodes;
  sums_.num_leaves = num_leaves_;
  sums_.nodes = nodes;
  sums_.values.resize(nodes.size());
  for (size_t k = 0; k < nodes.size(); ++k) {
    sums_.values[k].clear();
    for (size_t i = first; i < first + count; ++i) {
      if (stacks_[i].nodes != nodes) {
        return InternalError("gradient reducer: tensors of one step hold different partial "
                             "sums");
      }
      sums_.values[k].push_back(&stacks_[i].values[k]);
    }
  }
  return ops_->AllReduceTree(replica_, sums_, roots);
}

Status TreeGradientReducer::Add(Tensor* gradient) {
  if (!in_pass_) return FailedPreconditionError("gradient reducer: Add outside a pass");
  if (next_ >= sizes_.size()) {
    return InvalidArgumentError("gradient reducer: gradient " + std::to_string(next_ + 1) +
                                " of a pass announced with " + std::to_string(sizes_.size()));
  }
  if (static_cast<int64_t>(gradient->bytes()) != sizes_[next_]) {
    return InvalidArgumentError("gradient reducer: gradient " + std::to_string(next_ + 1) +
                                " has " + std::to_string(gradient->bytes()) +
                                " bytes, announced " + std::to_string(sizes_[next_]));
  }
  TOWER_RETURN_IF_ERROR(Push(stacks_[next_], *gradient));
  ++next_;
  if (!last_pass()) return OkStatus();
  pending_.push_back(gradient);
  // A full bucket is summed now, except the last (Finish adds the extras to it).
  if (next_ == bucket_ends_[bucket_] && bucket_ + 1 < bucket_ends_.size()) {
    TOWER_RETURN_IF_ERROR(Reduce(next_ - pending_.size(), pending_.size(), pending_));
    pending_.clear();
    ++bucket_;
  }
  return OkStatus();
}

Status TreeGradientReducer::Finish(Span<Tensor* const> extra) {
  if (!in_pass_) return FailedPreconditionError("gradient reducer: Finish outside a pass");
  in_pass_ = false;
  if (next_ != sizes_.size()) {
    return InvalidArgumentError("gradient reducer: the pass ended after " +
                                std::to_string(next_) + " of " + std::to_string(sizes_.size()) +
                                " announced gradients");
  }
  if (pass_ == 0) {
    num_extras_ = extra.size();
    stacks_.resize(sizes_.size() + num_extras_);
  } else if (extra.size() != num_extras_) {
    return InvalidArgumentError("gradient reducer: pass " + std::to_string(pass_) + " gives " +
                                std::to_string(extra.size()) + " extra tensors, pass 0 gave " +
                                std::to_string(num_extras_));
  }
  for (size_t e = 0; e < extra.size(); ++e) {
    TOWER_RETURN_IF_ERROR(Push(stacks_[sizes_.size() + e], *extra[e]));
  }
  if (!last_pass()) return OkStatus();
  const size_t gradients = pending_.size();
  for (Tensor* tensor : extra) pending_.push_back(tensor);
  if (!pending_.empty()) {
    TOWER_RETURN_IF_ERROR(Reduce(sizes_.size() - gradients, pending_.size(), pending_));
  }
  pending_.clear();
  pass_ = -1;
  return ops_->FinishReductions(replica_);
}

}  // namespace tower
