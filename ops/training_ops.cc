#include "ops/training_ops.h"

#include <cmath>

#include "ops/eager.h"
#include "ops/op_attrs.h"
#include "ops/op_checks.h"
#include "ops/op_names.h"

namespace tower::ops {
namespace {

Status CheckHyperparameters(float learning_rate, float momentum) {
  if (!std::isfinite(learning_rate) || learning_rate < 0) {
    return InvalidArgumentError("ApplySgd: learning rate must be finite and >= 0, got " +
                                std::to_string(learning_rate));
  }
  if (!std::isfinite(momentum) || momentum < 0 || momentum >= 1) {
    return InvalidArgumentError("ApplySgd: momentum must be in [0, 1), got " +
                                std::to_string(momentum));
  }
  return OkStatus();
}

}  // namespace

Status ApplySgd(Tensor& var, const Tensor& grad, float learning_rate) {
  static const OpKernels& kOp = KernelsOf(op_names::kApplySgd);
  TOWER_RETURN_IF_ERROR(internal::CheckBinary("ApplySgd", var, grad));
  TOWER_RETURN_IF_ERROR(CheckHyperparameters(learning_rate, 0));
  const attrs::Sgd attrs{learning_rate, 0.0f, false};
  RunOptions options;
  options.pinned = var.device();
  const Tensor* inputs[] = {&var, &grad};
  return RunOp(kOp, inputs, {}, &attrs, {}, options);
}

Status ApplySgdMomentum(Tensor& var, Tensor& velocity, const Tensor& grad, float learning_rate,
                        float momentum, bool nesterov) {
  static const OpKernels& kOp = KernelsOf(op_names::kApplySgd);
  TOWER_RETURN_IF_ERROR(internal::CheckBinary("ApplySgd", var, grad));
  TOWER_RETURN_IF_ERROR(internal::CheckBinary("ApplySgd", var, velocity));
  TOWER_RETURN_IF_ERROR(CheckHyperparameters(learning_rate, momentum));
  if (velocity.device() != var.device()) {
    return InvalidArgumentError("ApplySgd: the velocity is on " + velocity.device()->full_name() +
                                " but the variable on " + var.device()->full_name());
  }
  const attrs::Sgd attrs{learning_rate, momentum, nesterov};
  RunOptions options;
  options.pinned = var.device();
  const Tensor* inputs[] = {&var, &velocity, &grad};
  return RunOp(kOp, inputs, {}, &attrs, {}, options);
}

}  // namespace tower::ops
