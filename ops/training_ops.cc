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

Status ApplyAdam(Tensor& var, Tensor& m, Tensor& v, const Tensor& grad, float learning_rate,
                 float beta1, float beta2, float epsilon, int64_t step) {
  static const OpKernels& kOp = KernelsOf(op_names::kApplyAdam);
  TOWER_RETURN_IF_ERROR(internal::CheckBinary("ApplyAdam", var, grad));
  TOWER_RETURN_IF_ERROR(internal::CheckBinary("ApplyAdam", var, m));
  TOWER_RETURN_IF_ERROR(internal::CheckBinary("ApplyAdam", var, v));
  TOWER_RETURN_IF_ERROR(CheckHyperparameters(learning_rate, 0));
  const bool betas_ok = beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1;
  if (!betas_ok || !(epsilon > 0) || !std::isfinite(epsilon) || step < 1) {
    return InvalidArgumentError("ApplyAdam: need beta1, beta2 in [0, 1), epsilon > 0 and step >= 1; "
                                "got beta1 " + std::to_string(beta1) + ", beta2 " +
                                std::to_string(beta2) + ", epsilon " + std::to_string(epsilon) +
                                ", step " + std::to_string(step));
  }
  if (m.device() != var.device() || v.device() != var.device()) {
    return InvalidArgumentError("ApplyAdam: the slots m and v must be on the variable's device " +
                                var.device()->full_name());
  }
  const double t = static_cast<double>(step);
  const double alpha = learning_rate * std::sqrt(1.0 - std::pow(double{beta2}, t)) /
                       (1.0 - std::pow(double{beta1}, t));
  const attrs::Adam attrs{static_cast<float>(alpha), beta1, beta2, epsilon};
  RunOptions options;
  options.pinned = var.device();
  const Tensor* inputs[] = {&var, &m, &v, &grad};
  return RunOp(kOp, inputs, {}, &attrs, {}, options);
}

}  // namespace tower::ops
