#include "strategy/collectives/reduction_to_one_device.h"

#include "device/placement.h"
#include "ops/math_ops.h"

namespace tower {

ReductionToOneDevice::ReductionToOneDevice(Device* reduce_to,
                                           std::vector<std::string> replica_names,
                                           std::chrono::milliseconds timeout, bool spin)
    : reduce_to_(reduce_to),
      names_(replica_names),
      barrier_(std::move(replica_names), timeout, spin),
      published_(names_.size()),
      staged_(names_.size()),
      published_parts_(names_.size()),
      staged_nodes_(names_.size()) {}

Status ReductionToOneDevice::Phase(int replica, const Status& step) {
  if (!step.ok()) {
    const Status failure = step.WithContext(names_[replica]);
    barrier_.Abort(failure);
    return failure;
  }
  return barrier_.Wait(replica);
}

Status ReductionToOneDevice::Publish(int replica, Span<Tensor* const> tensors) {
  published_[replica] = tensors;
  TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
  const Status check = CheckAll();
  if (!check.ok()) {
    // Every replica finds the same mismatch; meet once more so that no list is read after
    // its owner has returned.
    TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
  }
  return check;
}

Status ReductionToOneDevice::CheckAll() const {
  const Span<Tensor* const>& first = published_[0];
  for (size_t r = 0; r < published_.size(); ++r) {
    const Span<Tensor* const>& list = published_[r];
    if (list.size() != first.size()) {
      return InvalidArgumentError("all-reduce mismatch: " + names_[r] + " passed " +
                                  std::to_string(list.size()) + " tensors, " + names_[0] +
                                  " passed " + std::to_string(first.size()));
    }
    for (size_t t = 0; t < list.size(); ++t) {
      if (list[t]->shape() != first[t]->shape() || list[t]->dtype() != first[t]->dtype()) {
        return InvalidArgumentError("all-reduce mismatch at tensor " + std::to_string(t) + ": " +
                                    names_[0] + " has " + first[t]->shape().ToString() + ", " +
                                    names_[r] + " has " + list[t]->shape().ToString());
      }
    }
  }
  return OkStatus();
}

Status ReductionToOneDevice::RunAllReduce(int replica, Span<Tensor* const> tensors,
                                          const AllReduceOptions& options) {
  if (options.tree != nullptr) return SumTree(replica, *options.tree, tensors);
  return Sum(replica, tensors);
}

Status ReductionToOneDevice::Sum(int replica, Span<Tensor* const> tensors) {
  const int n = static_cast<int>(names_.size());
  if (n == 1) return OkStatus();
  TOWER_RETURN_IF_ERROR(Publish(replica, tensors));
  // 1. Every replica copies its tensors to the reduce device, in parallel.
  Status step;
  staged_[replica].clear();
  for (Tensor* t : tensors) {
    StatusOr<Tensor> copy = t->CopyTo(reduce_to_);
    if (!copy.ok()) {
      step = copy.status();
      break;
    }
    staged_[replica].push_back(std::move(*copy));
  }
  TOWER_RETURN_IF_ERROR(Phase(replica, step));
  // 2. Replica 0 sums them on the reduce device.
  if (replica == 0) {
    results_.assign(tensors.size(), Tensor());
    DeviceScope scope(reduce_to_->full_name());
    for (size_t t = 0; t < tensors.size() && step.ok(); ++t) {
      std::vector<Tensor> terms;
      for (int r = 0; r < n; ++r) terms.push_back(staged_[r][t]);
      StatusOr<Tensor> sum = ops::AddN(terms);
      if (sum.ok()) {
        results_[t] = std::move(*sum);
      } else {
        step = sum.status();
      }
    }
  }
  TOWER_RETURN_IF_ERROR(Phase(replica, step));
  // 3. Every replica copies the sum back.
  for (size_t t = 0; t < tensors.size() && step.ok(); ++t) step = tensors[t]->CopyFrom(results_[t]);
  staged_[replica].clear();
  TOWER_RETURN_IF_ERROR(Phase(replica, step));
  return OkStatus();
}

Status ReductionToOneDevice::SumTree(int replica, const PartialSums& mine,
                                     Span<Tensor* const> roots) {
  published_parts_[replica] = &mine;
  published_[replica] = roots;
  TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
  const Status check = CheckTreeContributions(published_parts_, published_, names_,
                                              /*need_host_memory=*/false);
  if (!check.ok()) {
    TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
    return check;
  }
  // 1. Every replica copies its partial sums to the reduce device, in parallel.
  Status step;
  std::vector<std::vector<Tensor>>& staged = staged_nodes_[replica];
  staged.assign(mine.values.size(), {});
  for (size_t k = 0; k < mine.values.size() && step.ok(); ++k) {
    for (const Tensor* t : mine.values[k]) {
      StatusOr<Tensor> copy = t->CopyTo(reduce_to_);
      if (!copy.ok()) {
        step = copy.status();
        break;
      }
      staged[k].push_back(std::move(*copy));
    }
  }
  TOWER_RETURN_IF_ERROR(Phase(replica, step));
  // 2. Replica 0 evaluates the tree there.
  if (replica == 0) {
    const TreeNode root{0, mine.num_leaves};
    StatusOr<const SumPlan*> plan =
        plan_.Get(mine.num_leaves, published_parts_, Span<const TreeNode>(&root, 1));
    step = plan.status();
    results_.assign(roots.size(), Tensor());
    std::vector<const float*> inputs;
    for (size_t t = 0; t < roots.size() && step.ok(); ++t) {
      StatusOr<Tensor> sum = Tensor::Empty(reduce_to_, roots[t]->shape());
      if (!sum.ok()) {
        step = sum.status();
        break;
      }
      results_[t] = std::move(*sum);
      inputs.clear();
      for (const auto& nodes : staged_nodes_) {
        for (const std::vector<Tensor>& node : nodes) inputs.push_back(node[t].data<float>());
      }
      float* out = results_[t].data<float>();
      RunSumPlan(**plan, inputs.data(), &out, 1, 0, results_[t].num_elements());
    }
  }
  TOWER_RETURN_IF_ERROR(Phase(replica, step));
  // 3. Every replica copies the roots back.
  for (size_t t = 0; t < roots.size() && step.ok(); ++t) step = roots[t]->CopyFrom(results_[t]);
  TOWER_RETURN_IF_ERROR(Phase(replica, step));
  staged.clear();
  return OkStatus();
}

Status ReductionToOneDevice::Broadcast(int replica, Span<Tensor* const> tensors) {
  const int n = static_cast<int>(names_.size());
  if (n == 1) return OkStatus();
  TOWER_RETURN_IF_ERROR(Publish(replica, tensors));
  Status step;
  if (replica != 0) {
    for (size_t t = 0; t < tensors.size() && step.ok(); ++t) {
      step = tensors[t]->CopyFrom(*published_[0][t]);
    }
  }
  return Phase(replica, step);
}

}  // namespace tower
