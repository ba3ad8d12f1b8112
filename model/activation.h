// Activations of dense layers: linear, relu, sigmoid, tanh, softmax (Keras's names).
#ifndef TOWER_MODEL_ACTIVATION_H_
#define TOWER_MODEL_ACTIVATION_H_

#include <string>
#include <string_view>

#include "ops/tensor.h"

namespace tower {

enum class Activation { kLinear, kRelu, kSigmoid, kTanh, kSoftmax };

// "linear" (or ""), "relu", "sigmoid", "tanh", "softmax"; anything else is InvalidArgument
// listing the valid names.
StatusOr<Activation> ParseActivation(std::string_view name);
std::string_view ActivationName(Activation activation);

// y = f(z).
StatusOr<Tensor> ApplyActivation(Activation activation, const Tensor& z);
// dL/dz from dL/dy and y = f(z) (every activation here has a derivative expressible in y).
StatusOr<Tensor> ActivationGrad(Activation activation, const Tensor& dy, const Tensor& y);

}  // namespace tower

#endif  // TOWER_MODEL_ACTIVATION_H_
