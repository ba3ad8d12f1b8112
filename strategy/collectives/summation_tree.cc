#include "strategy/collectives/summation_tree.h"

#include <algorithm>
#include <cstring>

namespace tower {

std::string TreeNode::ToString() const {
  return end - first == 1 ? "leaf " + std::to_string(first)
                          : "leaves [" + std::to_string(first) + ", " + std::to_string(end) + ")";
}

int TreeSplit(const TreeNode& node) {
  int half = 1;
  while (2 * half < node.leaves()) half *= 2;
  return node.first + half;
}

namespace {

void Cover(const TreeNode& node, int first, int end, std::vector<TreeNode>* out) {
  if (node.end <= first || node.first >= end) return;
  if (first <= node.first && node.end <= end) {
    out->push_back(node);
    return;
  }
  const int split = TreeSplit(node);
  Cover({node.first, split}, first, end, out);
  Cover({split, node.end}, first, end, out);
}

class Planner {
 public:
  Planner(int num_leaves, Span<const TreeNode> inputs, SumPlan* plan)
      : num_leaves_(num_leaves), inputs_(inputs), plan_(plan) {}

  // The slot holding `node`'s sum, adding the steps that form it.
  StatusOr<int> Slot(const TreeNode& node) {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const TreeNode& input = inputs_[i];
      if (input == node) return static_cast<int>(i);
      if (input.first < node.end && node.first < input.end &&
          (input.first < node.first || node.end < input.end)) {
        return InvalidArgumentError("summation tree: the partial sum of " + input.ToString() +
                                    " straddles " + node.ToString() + " of the tree over " +
                                    std::to_string(num_leaves_) + " leaves");
      }
    }
    if (node.leaves() == 1) {
      return InvalidArgumentError("summation tree: nobody holds " + node.ToString() +
                                  " of the tree over " + std::to_string(num_leaves_) +
                                  " leaves");
    }
    const int split = TreeSplit(node);
    TOWER_ASSIGN_OR_RETURN(int a, Slot({node.first, split}));
    TOWER_ASSIGN_OR_RETURN(int b, Slot({split, node.end}));
    const int out = plan_->num_slots++;
    plan_->steps.push_back({out, a, b});
    return out;
  }

 private:
  const int num_leaves_;
  const Span<const TreeNode> inputs_;
  SumPlan* const plan_;
};

}  // namespace

bool IsTreeNode(int num_leaves, const TreeNode& node) {
  const std::vector<TreeNode> cover = CoverNodes(num_leaves, node.first, node.end);
  return cover.size() == 1 && cover[0] == node;
}

std::vector<TreeNode> CoverNodes(int num_leaves, int first, int end) {
  std::vector<TreeNode> out;
  if (num_leaves > 0 && first < end) Cover({0, num_leaves}, first, end, &out);
  return out;
}

StatusOr<SumPlan> PlanSums(int num_leaves, Span<const TreeNode> inputs,
                           Span<const TreeNode> outputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!IsTreeNode(num_leaves, inputs[i])) {
      return InvalidArgumentError("summation tree: " + inputs[i].ToString() +
                                  " is not a node of the tree over " +
                                  std::to_string(num_leaves) + " leaves");
    }
    if (i > 0 && inputs[i].first < inputs[i - 1].end) {
      return InvalidArgumentError("summation tree: partial sums out of leaf order or "
                                  "overlapping: " + inputs[i - 1].ToString() + " then " +
                                  inputs[i].ToString());
    }
  }
  SumPlan plan;
  plan.num_inputs = static_cast<int>(inputs.size());
  plan.num_slots = plan.num_inputs;
  Planner planner(num_leaves, inputs, &plan);
  for (const TreeNode& output : outputs) {
    if (!IsTreeNode(num_leaves, output)) {
      return InvalidArgumentError("summation tree: " + output.ToString() +
                                  " is not a node of the tree over " +
                                  std::to_string(num_leaves) + " leaves");
    }
    TOWER_ASSIGN_OR_RETURN(int slot, planner.Slot(output));
    plan.outputs.push_back(slot);
  }
  return plan;
}

void RunSumPlan(const SumPlan& plan, const float* const* inputs, float* const* outputs,
                int copies, int64_t begin, int64_t end) {
  // Elements go in blocks that keep the intermediate sums in cache (4 KB each, at most
  // num_leaves − 1 of them): no memory traffic beyond reading the inputs and writing the
  // outputs, and little bookkeeping per block.
  constexpr int64_t kBlock = 1024;
  const int temps = plan.num_slots - plan.num_inputs;
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(temps * kBlock)) scratch.resize(temps * kBlock);
  thread_local std::vector<const float*> slots;
  slots.resize(plan.num_slots);
  // A single output made by the last step (every root evaluation): that step writes straight
  // into the destinations, as a fused all-reduce loop would.
  const bool fuse_last = plan.outputs.size() == 1 && !plan.steps.empty() &&
                         plan.steps.back().out == plan.outputs[0];
  const size_t unfused = plan.steps.size() - (fuse_last ? 1 : 0);
  for (int64_t i = begin; i < end; i += kBlock) {
    const int64_t len = std::min(kBlock, end - i);
    for (int s = 0; s < plan.num_inputs; ++s) slots[s] = inputs[s] + i;
    for (size_t k = 0; k < unfused; ++k) {
      const SumPlan::Step& step = plan.steps[k];
      float* out = scratch.data() + (step.out - plan.num_inputs) * kBlock;
      const float* a = slots[step.a];
      const float* b = slots[step.b];
      for (int64_t j = 0; j < len; ++j) out[j] = a[j] + b[j];
      slots[step.out] = out;
    }
    if (fuse_last) {
      // The block of a and b is read whole before any other destination is written (a
      // destination may be a or b).
      const float* a = slots[plan.steps.back().a];
      const float* b = slots[plan.steps.back().b];
      float* first = outputs[0] + i;
      for (int64_t j = 0; j < len; ++j) first[j] = a[j] + b[j];
      for (int c = 1; c < copies; ++c) {
        if (outputs[c] + i != first) std::memcpy(outputs[c] + i, first, len * sizeof(float));
      }
      continue;
    }
    for (size_t k = 0; k < plan.outputs.size(); ++k) {
      const float* value = slots[plan.outputs[k]];
      for (int c = 0; c < copies; ++c) {
        float* dest = outputs[k * copies + c] + i;
        if (dest != value) std::memmove(dest, value, len * sizeof(float));
      }
    }
  }
}

}  // namespace tower
