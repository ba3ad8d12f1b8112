#include "strategy/collectives/cuda/tree_sum.h"

#include <string>

#include "device/cuda/cuda_status.h"
#include "strategy/collectives/cuda/tree_sum_kernel.h"

namespace tower {

Status CheckSumPlanFits(const SumPlan& plan, int num_outputs) {
  if (plan.num_inputs > cuda::kMaxTreeInputs ||
      static_cast<int>(plan.steps.size()) > cuda::kMaxTreeSteps ||
      num_outputs > cuda::kMaxTreeOutputs) {
    return InvalidArgumentError(
        "the GPU summation tree takes at most " + std::to_string(cuda::kMaxTreeInputs) +
        " partial sums, " + std::to_string(cuda::kMaxTreeSteps) + " additions and " +
        std::to_string(cuda::kMaxTreeOutputs) + " replicas per card; this one has " +
        std::to_string(plan.num_inputs) + ", " + std::to_string(plan.steps.size()) + " and " +
        std::to_string(num_outputs) + " (use at most " + std::to_string(cuda::kMaxTreeInputs) +
        " virtual shards)");
  }
  return OkStatus();
}

Status LaunchSumPlan(const SumPlan& plan, const std::vector<const float*>& inputs,
                     const std::vector<float*>& outputs, int64_t count, cudaStream_t stream,
                     const std::string& where) {
  if (plan.outputs.size() != 1 || static_cast<int>(inputs.size()) != plan.num_inputs ||
      outputs.empty()) {
    return InternalError("device summation tree: a plan of " +
                         std::to_string(plan.outputs.size()) + " outputs and " +
                         std::to_string(plan.num_inputs) + " inputs given " +
                         std::to_string(inputs.size()) + " input and " +
                         std::to_string(outputs.size()) + " output buffers");
  }
  TOWER_RETURN_IF_ERROR(CheckSumPlanFits(plan, static_cast<int>(outputs.size())));
  cuda::TreeSumArgs args{};  // unused entries zero
  args.num_inputs = plan.num_inputs;
  args.num_steps = static_cast<int>(plan.steps.size());
  args.num_outputs = static_cast<int>(outputs.size());
  args.root = plan.outputs[0];
  for (int s = 0; s < plan.num_inputs; ++s) args.inputs[s] = inputs[s];
  for (size_t o = 0; o < outputs.size(); ++o) args.outputs[o] = outputs[o];
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    args.steps[k][0] = static_cast<int16_t>(plan.steps[k].out);
    args.steps[k][1] = static_cast<int16_t>(plan.steps[k].a);
    args.steps[k][2] = static_cast<int16_t>(plan.steps[k].b);
  }
  TOWER_CUDA_RETURN_IF_ERROR(cuda::LaunchTreeSum(args, count, stream), where);
  return OkStatus();
}

}  // namespace tower
