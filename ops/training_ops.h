// Optimizer updates, fused and in place: they run on the variable's device (whatever the
// scope says); a gradient elsewhere is copied there first.
#ifndef TOWER_OPS_TRAINING_OPS_H_
#define TOWER_OPS_TRAINING_OPS_H_

#include "ops/op_attrs.h"
#include "ops/tensor.h"

namespace tower::ops {

// var −= learning_rate · grad.
Status ApplySgd(Tensor& var, const Tensor& grad, float learning_rate);
// Keras's SGD with momentum (velocity starts at zero, lives on var's device):
//   velocity = momentum · velocity − learning_rate · grad
//   var += velocity                                   (plain)
//   var += momentum · velocity − learning_rate · grad  (Nesterov)
Status ApplySgdMomentum(Tensor& var, Tensor& velocity, const Tensor& grad, float learning_rate,
                        float momentum, bool nesterov);

// Adam at step `step` (1-based; TensorFlow's formula, see attrs::Adam). m and v start at
// zero and live on var's device. `weight_decay` > 0: AdamW (var −= lr·weight_decay·var
// first).
Status ApplyAdam(Tensor& var, Tensor& m, Tensor& v, const Tensor& grad, float learning_rate,
                 float beta1, float beta2, float epsilon, int64_t step,
                 float weight_decay = 0);

// The checked attributes of those updates: what the ops run with, and what the host
// updates below take (checked once per step, not per slice).
StatusOr<attrs::Sgd> SgdAttrs(float learning_rate, float momentum, bool nesterov);
// Adam's bias-corrected rate of step `step` (1-based) folded into attrs::Adam::alpha, and
// AdamW's learning_rate · weight_decay into attrs::Adam::decay.
StatusOr<attrs::Adam> AdamAttrs(float learning_rate, float beta1, float beta2, float epsilon,
                                int64_t step, float weight_decay = 0);

// The same updates on `n` elements of host arrays, with no dispatch: for replicas that share
// one copy of their variables in host memory, each updating its own slice as the summed
// gradient arrives. A slice splits over the caller's intra-op threads, as the ops do (one
// batch of every replica updates every element on the caller). The bits are those of the
// ops over the same elements, for any slicing and split. `velocity`: nullptr without momentum.
void SgdOnHost(const attrs::Sgd& sgd, float* var, float* velocity, const float* grad,
               int64_t n);
void AdamOnHost(const attrs::Adam& adam, float* var, float* m, float* v, const float* grad,
                int64_t n);

}  // namespace tower::ops

#endif  // TOWER_OPS_TRAINING_OPS_H_
