// CPU kernels of the optimizer updates, in place on the variables.
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/eigen.h"
#include "ops/op_attrs.h"

namespace tower::cpu {

// In place: inputs var, grad (momentum 0) or var, velocity, grad.
Status ApplySgd(const KernelContext& ctx) {
  const auto& sgd = ctx.attr<attrs::Sgd>();
  ArrayMap var = MutableFlat(ctx.input(0));
  if (ctx.inputs.size() == 2) {
    var -= sgd.learning_rate * Flat(ctx.input(1));
    return OkStatus();
  }
  ArrayMap velocity = MutableFlat(ctx.input(1));
  const auto grad = Flat(ctx.input(2));
  velocity = sgd.momentum * velocity - sgd.learning_rate * grad;
  if (sgd.nesterov) {
    var += sgd.momentum * velocity - sgd.learning_rate * grad;
  } else {
    var += velocity;
  }
  return OkStatus();
}

// In place: inputs var, m, v, grad.
Status ApplyAdam(const KernelContext& ctx) {
  const auto& adam = ctx.attr<attrs::Adam>();
  ArrayMap var = MutableFlat(ctx.input(0));
  ArrayMap m = MutableFlat(ctx.input(1));
  ArrayMap v = MutableFlat(ctx.input(2));
  const auto grad = Flat(ctx.input(3));
  m += (1.0f - adam.beta1) * (grad - m);
  v += (1.0f - adam.beta2) * (grad.square() - v);
  var -= adam.alpha * m / (v.sqrt() + adam.epsilon);
  return OkStatus();
}

}  // namespace tower::cpu
