// The fixed summation tree of deterministic (topology-invariant) training.
//
// In that mode every global batch is cut into `num_leaves` virtual shards, each computed by
// its own forward/backward call whichever replica runs it, and every sum across the batch —
// gradients, loss — adds the shards' values along one binary tree over the leaves, fixed by
// `num_leaves` alone. A replica pre-sums the subtrees that lie wholly in its leaves; the
// all-reduce (every CrossDeviceOps path, MPI, NCCL) combines the partial sums it is given
// into the root along the same tree. Floating-point addition is commutative, so each node's
// value depends only on its children's: the root has the same bits however the leaves were
// spread over replicas, processes and buckets.
//
// The tree: node [first, end) with two or more leaves splits at first + P, P the largest power
// of two below end − first (8 leaves: a perfect tree; 6: [0,4) and [4,6)).
#ifndef TOWER_STRATEGY_COLLECTIVES_SUMMATION_TREE_H_
#define TOWER_STRATEGY_COLLECTIVES_SUMMATION_TREE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "util/span.h"
#include "util/statusor.h"

namespace tower {

// Leaves [first, end) of the tree: a node when it is one (see IsTreeNode).
struct TreeNode {
  int first = 0;
  int end = 0;
  int leaves() const { return end - first; }
  bool operator==(const TreeNode& other) const {
    return first == other.first && end == other.end;
  }
  bool operator!=(const TreeNode& other) const { return !(*this == other); }
  std::string ToString() const;
};

// Where node `node` (two or more leaves) splits into its two children.
int TreeSplit(const TreeNode& node);
// Whether [first, end) is a node of the tree over `num_leaves` leaves.
bool IsTreeNode(int num_leaves, const TreeNode& node);
// The largest nodes lying wholly inside leaves [first, end), in leaf order: the partial sums
// whoever holds those leaves can form on its own. Empty range: none.
std::vector<TreeNode> CoverNodes(int num_leaves, int first, int end);

// A straight-line program of additions that turns partial sums (inputs: nodes in leaf
// order) into other nodes (outputs), each sum taken where the tree takes it.
struct SumPlan {
  struct Step {
    int out;  // slot written
    int a;    // left child's slot
    int b;    // right child's slot
  };
  int num_inputs = 0;
  int num_slots = 0;         // inputs first, then one per step
  std::vector<Step> steps;   // in an order where children come before parents
  std::vector<int> outputs;  // each output's slot
};

// The plan from `inputs` to `outputs` on the tree over `num_leaves` leaves. Fails, naming
// the node, when an output is not a tree node, or its leaves are not exactly tiled by
// whole inputs (a missing leaf, an overlap, or an input straddling the output's children).
StatusOr<SumPlan> PlanSums(int num_leaves, Span<const TreeNode> inputs,
                           Span<const TreeNode> outputs);

// Runs `plan` on elements [begin, end) of float arrays: inputs[i] is input slot i, and output
// k goes to every one of outputs[k * copies + c], c < copies. Each block of elements is read
// whole before any output of it is written, so an output array may be an input array as
// long as no later output is that input itself. Two threads must not run overlapping
// element ranges on the same arrays.
void RunSumPlan(const SumPlan& plan, const float* const* inputs, float* const* outputs,
                int copies, int64_t begin, int64_t end);

}  // namespace tower

#endif  // TOWER_STRATEGY_COLLECTIVES_SUMMATION_TREE_H_
