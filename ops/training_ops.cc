#include "ops/training_ops.h"

#include <cmath>

#include "ops/cpu/cpu_kernels.h"
#include "ops/eager.h"
#include "ops/op_checks.h"
#include "ops/op_names.h"

namespace tower::ops {

StatusOr<attrs::Sgd> SgdAttrs(float learning_rate, float momentum, bool nesterov) {
  if (!std::isfinite(learning_rate) || learning_rate < 0) {
    return InvalidArgumentError("ApplySgd: learning rate must be finite and >= 0, got " +
                                std::to_string(learning_rate));
  }
  if (!std::isfinite(momentum) || momentum < 0 || momentum >= 1) {
    return InvalidArgumentError("ApplySgd: momentum must be in [0, 1), got " +
                                std::to_string(momentum));
  }
  return attrs::Sgd{learning_rate, momentum, nesterov};
}

StatusOr<attrs::Adam> AdamAttrs(float learning_rate, float beta1, float beta2, float epsilon,
                                int64_t step, float weight_decay) {
  if (!std::isfinite(learning_rate) || learning_rate < 0) {
    return InvalidArgumentError("ApplyAdam: learning rate must be finite and >= 0, got " +
                                std::to_string(learning_rate));
  }
  const bool betas_ok = beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1;
  if (!betas_ok || !(epsilon > 0) || !std::isfinite(epsilon) || step < 1) {
    return InvalidArgumentError("ApplyAdam: need beta1, beta2 in [0, 1), epsilon > 0 and step >= 1; "
                                "got beta1 " + std::to_string(beta1) + ", beta2 " +
                                std::to_string(beta2) + ", epsilon " + std::to_string(epsilon) +
                                ", step " + std::to_string(step));
  }
  if (!std::isfinite(weight_decay) || weight_decay < 0) {
    return InvalidArgumentError("ApplyAdam: weight decay must be finite and >= 0, got " +
                                std::to_string(weight_decay));
  }
  const double t = static_cast<double>(step);
  const double alpha = learning_rate * std::sqrt(1.0 - std::pow(double{beta2}, t)) /
                       (1.0 - std::pow(double{beta1}, t));
  const double decay = double{learning_rate} * weight_decay;
  return attrs::Adam{static_cast<float>(alpha), beta1, beta2, epsilon, static_cast<float>(decay)};
}

void SgdOnHost(const attrs::Sgd& sgd, float* var, float* velocity, const float* grad,
               int64_t n) {
  cpu::SgdUpdateSplit(sgd, var, velocity, grad, n);
}

void AdamOnHost(const attrs::Adam& adam, float* var, float* m, float* v, const float* grad,
                int64_t n) {
  cpu::AdamUpdateSplit(adam, var, m, v, grad, n);
}

Status ApplySgd(Tensor& var, const Tensor& grad, float learning_rate) {
  static const OpKernels& kOp = KernelsOf(op_names::kApplySgd);
  TOWER_RETURN_IF_ERROR(internal::CheckBinary("ApplySgd", var, grad));
  TOWER_ASSIGN_OR_RETURN(const attrs::Sgd attrs, SgdAttrs(learning_rate, 0.0f, false));
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
  TOWER_ASSIGN_OR_RETURN(const attrs::Sgd attrs, SgdAttrs(learning_rate, momentum, nesterov));
  if (velocity.device() != var.device()) {
    return InvalidArgumentError("ApplySgd: the velocity is on " + velocity.device()->full_name() +
                                " but the variable on " + var.device()->full_name());
  }
  RunOptions options;
  options.pinned = var.device();
  const Tensor* inputs[] = {&var, &velocity, &grad};
  return RunOp(kOp, inputs, {}, &attrs, {}, options);
}

Status ApplyAdam(Tensor& var, Tensor& m, Tensor& v, const Tensor& grad, float learning_rate,
                 float beta1, float beta2, float epsilon, int64_t step, float weight_decay) {
  static const OpKernels& kOp = KernelsOf(op_names::kApplyAdam);
  TOWER_RETURN_IF_ERROR(internal::CheckBinary("ApplyAdam", var, grad));
  TOWER_RETURN_IF_ERROR(internal::CheckBinary("ApplyAdam", var, m));
  TOWER_RETURN_IF_ERROR(internal::CheckBinary("ApplyAdam", var, v));
  TOWER_ASSIGN_OR_RETURN(const attrs::Adam attrs,
                         AdamAttrs(learning_rate, beta1, beta2, epsilon, step, weight_decay));
  if (m.device() != var.device() || v.device() != var.device()) {
    return InvalidArgumentError("ApplyAdam: the slots m and v must be on the variable's device " +
                                var.device()->full_name());
  }
  RunOptions options;
  options.pinned = var.device();
  const Tensor* inputs[] = {&var, &m, &v, &grad};
  return RunOp(kOp, inputs, {}, &attrs, {}, options);
}

}  // namespace tower::ops
