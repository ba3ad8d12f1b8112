// PassAccumulator: a replica's passes of one step summed locally, before the all-reduce.
//
// Gradient accumulation (Sequential::SetGradientAccumulation) runs each replica's shard of
// a global batch as several micro-batches, one forward/backward pass each, and sums their
// gradients across replicas once. The reducers that sum across replicas take those passes
// through this class: an earlier pass's gradients and extras (the loss) are kept as partial
// sums, and the last pass's tensors receive them just before they are summed across
// replicas, so a bucket can still start its all-reduce while backward runs. The order is
// fixed, ((p0 + p1) + p2) + p3, the same on every replica and step (bitwise run to run).
#ifndef TOWER_STRATEGY_STEP_PASS_ACCUMULATOR_H_
#define TOWER_STRATEGY_STEP_PASS_ACCUMULATOR_H_

#include <cstddef>
#include <vector>

#include "ops/tensor.h"
#include "util/span.h"
#include "util/statusor.h"

namespace tower {

class PassAccumulator {
 public:
  // Starts pass `pass` of `passes` (0-based, in order; a new step starts at pass 0).
  Status Begin(int pass, int passes);
  // Whether the current pass is the step's last: the one whose sums go to the all-reduce.
  bool last_pass() const { return pass_ + 1 == passes_; }

  // Gradient `index` of the current pass. Before the last pass it joins the partial sum
  // (the tensor is kept, not modified); on the last, *gradient becomes partial + *gradient
  // (a new tensor on the same device), and the partial sum is released.
  Status Add(size_t index, Tensor* gradient);
  // The same for the pass's extras (every pass gives the same number).
  Status AddExtras(Span<Tensor* const> extra);

 private:
  // partial = partial + next (the first pass's tensor as it is).
  static Status Accumulate(Tensor* partial, const Tensor& next);

  int pass_ = 0;
  int passes_ = 1;
  std::vector<Tensor> gradients_;  // by gradient index
  std::vector<Tensor> extras_;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_STEP_PASS_ACCUMULATOR_H_
