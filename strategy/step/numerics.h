// Finiteness and norms of float32 tensors: what loss scaling, check-numerics, global-norm
// clipping and a step's recorded gradient norm are computed with, in one place.
#ifndef TOWER_STRATEGY_STEP_NUMERICS_H_
#define TOWER_STRATEGY_STEP_NUMERICS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "ops/tensor.h"
#include "util/statusor.h"

namespace tower {

// The first non-finite element of a float32 tensor: its index, and whether it is NaN (else
// Inf). One scan finds whether there is one (a branch-free sum, in place in host memory,
// copied from a device); only then is it located. What loss scaling and check-numerics use.
struct NonFinite {
  int64_t index = 0;
  bool nan = false;
};
StatusOr<std::optional<NonFinite>> FirstNonFinite(const Tensor& tensor);
// Whether every element of every tensor is finite.
StatusOr<bool> AllFinite(const std::vector<Tensor>& tensors);

// ‖tensors‖₂ over every element of every float32 tensor: the squares summed in double, in
// `tensors` order (on the host for host memory, else by the device's ReduceSum), then the
// square root. The one place a global norm is computed: global-norm clipping
// (Optimizer::GlobalNormScale) and the gradient norm a training step records
// (StepRunner, for StepStats) both call it. May be Inf or NaN.
StatusOr<double> GlobalNorm(const std::vector<Tensor>& tensors);

// OK when `loss` is one float32 value (what a loss computes), else Internal: what the step
// checks before reading a loss to the host.
Status CheckLossIsOneFloat(const Tensor& loss);

}  // namespace tower

#endif  // TOWER_STRATEGY_STEP_NUMERICS_H_
