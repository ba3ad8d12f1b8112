// The host side of the device summation tree: a SumPlan and the buffers of one tensor,
// packed into one launch of the tree-sum kernel (strategy/collectives/cuda/tree_sum_kernel.h).
#ifndef TOWER_STRATEGY_COLLECTIVES_CUDA_TREE_SUM_H_
#define TOWER_STRATEGY_COLLECTIVES_CUDA_TREE_SUM_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "strategy/collectives/summation_tree.h"
#include "util/status.h"

namespace tower {

// Whether one launch can evaluate `plan` (one output: the root) into `num_outputs` buffers:
// InvalidArgument beyond the kernel's limits (64 partial sums, 64 additions, 32 outputs),
// saying what to change. A plan over at most 64 virtual shards always fits. The collectives
// check this on every replica before anything is launched, so all of them fail alike.
Status CheckSumPlanFits(const SumPlan& plan, int num_outputs);

// Evaluates `plan` (one output: the root) on `count` elements of device buffers, on
// `stream`: inputs[s] is input slot s; the root goes to every one of `outputs`. Each element
// is read from every input before it is written to any output, so an output may be an
// input. Fails as CheckSumPlanFits does, or with the launch's CUDA error (naming `where`).
Status LaunchSumPlan(const SumPlan& plan, const std::vector<const float*>& inputs,
                     const std::vector<float*>& outputs, int64_t count, cudaStream_t stream,
                     const std::string& where);

}  // namespace tower

#endif  // TOWER_STRATEGY_COLLECTIVES_CUDA_TREE_SUM_H_
