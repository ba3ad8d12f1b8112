// Optimizer updates, fused and in place: they run on the variable's device (whatever the
// scope says); a gradient elsewhere is copied there first.
#ifndef TOWER_OPS_TRAINING_OPS_H_
#define TOWER_OPS_TRAINING_OPS_H_

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
// zero and live on var's device.
Status ApplyAdam(Tensor& var, Tensor& m, Tensor& v, const Tensor& grad, float learning_rate,
                 float beta1, float beta2, float epsilon, int64_t step);

}  // namespace tower::ops

#endif  // TOWER_OPS_TRAINING_OPS_H_
