#include "model/activation.h"

#include "ops/nn_ops.h"

namespace tower {

StatusOr<Activation> ParseActivation(std::string_view name) {
  if (name.empty() || name == "linear") return Activation::kLinear;
  if (name == "relu") return Activation::kRelu;
  if (name == "sigmoid") return Activation::kSigmoid;
  if (name == "tanh") return Activation::kTanh;
  if (name == "softmax") return Activation::kSoftmax;
  return InvalidArgumentError("unknown activation '" + std::string(name) +
                              "'; use linear, relu, sigmoid, tanh or softmax");
}

std::string_view ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kLinear: return "linear";
    case Activation::kRelu: return "relu";
    case Activation::kSigmoid: return "sigmoid";
    case Activation::kTanh: return "tanh";
    case Activation::kSoftmax: return "softmax";
  }
  return "?";
}

StatusOr<Tensor> ApplyActivation(Activation activation, const Tensor& z) {
  switch (activation) {
    case Activation::kLinear: return z;
    case Activation::kRelu: return ops::Relu(z);
    case Activation::kSigmoid: return ops::Sigmoid(z);
    case Activation::kTanh: return ops::Tanh(z);
    case Activation::kSoftmax: return ops::Softmax(z);
  }
  return InternalError("unhandled activation");
}

StatusOr<Tensor> ActivationGrad(Activation activation, const Tensor& dy, const Tensor& y) {
  switch (activation) {
    case Activation::kLinear: return dy;
    case Activation::kRelu: return ops::ReluGrad(dy, y);  // y > 0 exactly where z > 0
    case Activation::kSigmoid: return ops::SigmoidGrad(dy, y);
    case Activation::kTanh: return ops::TanhGrad(dy, y);
    case Activation::kSoftmax: return ops::SoftmaxGrad(dy, y);
  }
  return InternalError("unhandled activation");
}

}  // namespace tower
