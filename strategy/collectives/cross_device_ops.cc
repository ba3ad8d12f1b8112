#include "strategy/collectives/cross_device_ops.h"

namespace tower {

void Fingerprinter::MixLayout(Span<Tensor* const> tensors) {
  Mix(tensors.size());
  for (const Tensor* t : tensors) {
    Mix(static_cast<uint64_t>(t->dtype()));
    Mix(static_cast<uint64_t>(t->shape().rank()));
    for (int d = 0; d < t->shape().rank(); ++d) Mix(static_cast<uint64_t>(t->shape().dim(d)));
    Mix(t->device()->stream().host_addressable() ? 1 : 0);
  }
}

Status CrossDeviceOps::CheckSupported(const AllReduceOptions& options) const {
  if (options.handed > 0) {
    return UnimplementedError("the " + name() +
                              " all-reduce cannot hand sums over (AllReduceOptions::handed)");
  }
  if (options.folded > 0) {
    return UnimplementedError("the " + name() +
                              " all-reduce cannot sum folded gradients (AllReduceOptions::folded)");
  }
  return OkStatus();
}

Status CrossDeviceOps::CheckOptions(const AllReduceOptions& options, size_t tensors) const {
  if (options.tree != nullptr && (options.folded > 0 || options.handed > 0)) {
    return InvalidArgumentError("the " + name() +
                                " all-reduce: a tree sum (AllReduceOptions::tree) has no folded "
                                "or handed-over tensors, but " +
                                std::to_string(options.folded) + " are folded and " +
                                std::to_string(options.handed) + " handed");
  }
  if (options.handed > 0 && options.sink == nullptr) {
    return InvalidArgumentError("the " + name() + " all-reduce: " + std::to_string(options.handed) +
                                " tensors to hand over (AllReduceOptions::handed) to no sink");
  }
  if (options.folded > 0 && options.fold_groups <= 0) {
    return InvalidArgumentError("the " + name() + " all-reduce: " + std::to_string(options.folded) +
                                " folded tensors (AllReduceOptions::folded) from " +
                                std::to_string(options.fold_groups) + " groups");
  }
  TOWER_RETURN_IF_ERROR(CheckSupported(options));
  if (options.folded > tensors || options.handed > tensors) {
    return InvalidArgumentError("the " + name() + " all-reduce: " + std::to_string(options.folded) +
                                " folded and " + std::to_string(options.handed) +
                                " handed-over tensors of " + std::to_string(tensors) +
                                " (AllReduceOptions)");
  }
  return OkStatus();
}

uint64_t TensorLayoutFingerprint(Span<Tensor* const> tensors) {
  Fingerprinter h;
  h.MixLayout(tensors);
  return h.value();
}

uint64_t TreeContributionFingerprint(const PartialSums& part, Span<Tensor* const> roots) {
  Fingerprinter h;
  h.Mix(static_cast<uint64_t>(part.num_leaves));
  h.Mix(part.nodes.size());
  for (const TreeNode& node : part.nodes) {
    h.Mix(static_cast<uint64_t>(node.first));
    h.Mix(static_cast<uint64_t>(node.end));
  }
  h.Mix(part.values.size());
  for (const std::vector<Tensor*>& values : part.values) h.MixLayout(values);
  h.MixLayout(roots);
  return h.value();
}

Status CheckTreeContributions(Span<const PartialSums* const> parts,
                              Span<const Span<Tensor* const>> roots,
                              const std::vector<std::string>& names, bool need_host_memory) {
  const Span<Tensor* const>& first = roots[0];
  for (size_t r = 0; r < parts.size(); ++r) {
    const PartialSums& part = *parts[r];
    if (part.num_leaves != parts[0]->num_leaves || roots[r].size() != first.size()) {
      return InvalidArgumentError(
          "tree all-reduce mismatch: " + names[r] + " reduces " +
          std::to_string(roots[r].size()) + " tensors over " + std::to_string(part.num_leaves) +
          " leaves, " + names[0] + " " + std::to_string(first.size()) + " over " +
          std::to_string(parts[0]->num_leaves));
    }
    if (part.values.size() != part.nodes.size()) {
      return InvalidArgumentError("tree all-reduce: " + names[r] + " gives " +
                                  std::to_string(part.values.size()) + " value lists for " +
                                  std::to_string(part.nodes.size()) + " nodes");
    }
    for (size_t k = 0; k <= part.nodes.size(); ++k) {
      // Every node's tensors, then the roots, against replica 0's roots.
      const bool is_root = k == part.nodes.size();
      const Span<Tensor* const> list = is_root ? roots[r] : Span<Tensor* const>(part.values[k]);
      const std::string what = is_root ? "root" : part.nodes[k].ToString();
      if (list.size() != first.size()) {
        return InvalidArgumentError("tree all-reduce: " + names[r] + " gives " + what + " " +
                                    std::to_string(list.size()) + " tensors, not " +
                                    std::to_string(first.size()));
      }
      for (size_t t = 0; t < list.size(); ++t) {
        const Tensor& a = *first[t];
        const Tensor& b = *list[t];
        if (a.shape() != b.shape() || b.dtype() != DType::kFloat32) {
          return InvalidArgumentError(
              "tree all-reduce mismatch at tensor " + std::to_string(t) + ": " + names[0] +
              "'s root is " + std::string(DTypeName(a.dtype())) + a.shape().ToString() + ", " +
              names[r] + "'s " + what + " is " + std::string(DTypeName(b.dtype())) +
              b.shape().ToString() + " (float32 of one shape needed)");
        }
        if (need_host_memory && !b.device()->stream().host_addressable()) {
          return InvalidArgumentError("this all-reduce needs host memory, but " + names[r] +
                                      " holds tensor " + std::to_string(t) + " on " +
                                      b.device()->full_name());
        }
      }
    }
  }
  return OkStatus();
}

StatusOr<const SumPlan*> TreePlanCache::Get(int num_leaves,
                                            Span<const PartialSums* const> parts,
                                            Span<const TreeNode> outputs) {
  nodes_scratch_.clear();
  for (const PartialSums* part : parts) {
    nodes_scratch_.insert(nodes_scratch_.end(), part->nodes.begin(), part->nodes.end());
  }
  const bool same = valid_ && num_leaves == num_leaves_ && nodes_scratch_ == inputs_ &&
                    std::equal(outputs.begin(), outputs.end(), outputs_.begin(), outputs_.end());
  if (!same) {
    valid_ = false;
    TOWER_ASSIGN_OR_RETURN(plan_, PlanSums(num_leaves, nodes_scratch_, outputs));
    num_leaves_ = num_leaves;
    inputs_ = nodes_scratch_;
    outputs_.assign(outputs.begin(), outputs.end());
    valid_ = true;
  }
  return &plan_;
}

}  // namespace tower
