#include "ops/nn_ops.h"

#include "ops/eager.h"
#include "ops/op_attrs.h"
#include "ops/op_checks.h"
#include "ops/op_names.h"

namespace tower::ops {

using internal::CheckBinary;
using internal::CheckFloat;
using internal::CheckFloating;
using internal::CheckRank;

namespace {

// The activations and their gradients take float32, or 16-bit tensors (mixed precision)
// which they compute in float and round once to their dtype (ops/cpu/eigen.h); all inputs
// of one dtype, the output of it too.
StatusOr<Tensor> Activation(const OpKernels& op, const char* name, const Tensor& x) {
  TOWER_RETURN_IF_ERROR(CheckFloating(name, "x", x));
  return RunSingle(op, {&x}, OutputSpec{x.shape(), x.dtype()});
}

// `other` is x (ReluGrad) or y (the others), named `other_name`.
StatusOr<Tensor> ActivationGrad(const OpKernels& op, const char* name, const Tensor& dy,
                                const char* other_name, const Tensor& other) {
  TOWER_RETURN_IF_ERROR(CheckFloating(name, "dy", dy));
  TOWER_RETURN_IF_ERROR(CheckFloating(name, other_name, other));
  TOWER_RETURN_IF_ERROR(internal::CheckSameDType(name, "dy", dy, other_name, other));
  TOWER_RETURN_IF_ERROR(internal::CheckSameShape(name, dy, other));
  return RunSingle(op, {&dy, &other}, OutputSpec{dy.shape(), dy.dtype()});
}

// 1 / (global_batch · per_row), checking that the global batch covers these rows.
StatusOr<attrs::Loss> LossScale(const char* op, const Tensor& pred, int64_t global_batch,
                                int64_t per_row) {
  const int64_t rows = pred.shape().rank() == 0 ? 1 : pred.shape().dim(0);
  if (global_batch < 0) global_batch = rows;
  if (global_batch == 0 || global_batch < rows) {
    return InvalidArgumentError(std::string(op) + ": the global batch size (" +
                                std::to_string(global_batch) + ") must be positive and at "
                                "least the rows given (" + std::to_string(rows) + ")");
  }
  const double denominator = static_cast<double>(global_batch) * static_cast<double>(per_row);
  return attrs::Loss{static_cast<float>(1.0 / (denominator > 0 ? denominator : 1.0))};
}

StatusOr<Tensor> Mse(const OpKernels& op, const char* name, const Tensor& pred,
                     const Tensor& target, int64_t global_batch, bool grad) {
  TOWER_RETURN_IF_ERROR(CheckBinary(name, pred, target));
  if (pred.shape().rank() < 1) {
    return InvalidArgumentError(std::string(name) + ": pred must have a batch dimension, got " +
                                pred.shape().ToString());
  }
  TOWER_ASSIGN_OR_RETURN(attrs::Loss scale,
                         LossScale(name, pred, global_batch, pred.shape().row_size()));
  return RunSingle(op, {&pred, &target}, OutputSpec{grad ? pred.shape() : Shape()}, &scale);
}

StatusOr<Tensor> CrossEntropy(const OpKernels& op, const char* name, const Tensor& logits,
                              const Tensor& labels, int64_t global_batch, bool grad,
                              bool labels_checked) {
  TOWER_RETURN_IF_ERROR(CheckFloat(name, "logits", logits));
  TOWER_RETURN_IF_ERROR(CheckRank(name, "logits", logits, 2));
  TOWER_RETURN_IF_ERROR(internal::CheckValid(name, "labels", labels));
  TOWER_RETURN_IF_ERROR(CheckDType(name, "labels", labels, DType::kInt32));
  TOWER_RETURN_IF_ERROR(CheckRank(name, "labels", labels, 1));
  if (labels.shape().dim(0) != logits.shape().dim(0)) {
    return ShapeError(name, "logits and labels need as many rows; got", logits.shape(),
                      labels.shape());
  }
  if (logits.shape().dim(1) == 0) {
    return InvalidArgumentError(std::string(name) + ": logits need at least one class, got " +
                                logits.shape().ToString());
  }
  TOWER_ASSIGN_OR_RETURN(attrs::Loss scale, LossScale(name, logits, global_batch, 1));
  scale.labels_checked = labels_checked;
  return RunSingle(op, {&logits, &labels}, OutputSpec{grad ? logits.shape() : Shape()}, &scale);
}

}  // namespace

StatusOr<Tensor> Relu(const Tensor& x) {
  static const OpKernels& kOp = KernelsOf(op_names::kRelu);
  return Activation(kOp, "Relu", x);
}

StatusOr<Tensor> ReluGrad(const Tensor& dy, const Tensor& x) {
  static const OpKernels& kOp = KernelsOf(op_names::kReluGrad);
  return ActivationGrad(kOp, "ReluGrad", dy, "x", x);
}

StatusOr<Tensor> Sigmoid(const Tensor& x) {
  static const OpKernels& kOp = KernelsOf(op_names::kSigmoid);
  return Activation(kOp, "Sigmoid", x);
}

StatusOr<Tensor> SigmoidGrad(const Tensor& dy, const Tensor& y) {
  static const OpKernels& kOp = KernelsOf(op_names::kSigmoidGrad);
  return ActivationGrad(kOp, "SigmoidGrad", dy, "y", y);
}

StatusOr<Tensor> Tanh(const Tensor& x) {
  static const OpKernels& kOp = KernelsOf(op_names::kTanh);
  return Activation(kOp, "Tanh", x);
}

StatusOr<Tensor> TanhGrad(const Tensor& dy, const Tensor& y) {
  static const OpKernels& kOp = KernelsOf(op_names::kTanhGrad);
  return ActivationGrad(kOp, "TanhGrad", dy, "y", y);
}

StatusOr<Tensor> Softmax(const Tensor& logits) {
  static const OpKernels& kOp = KernelsOf(op_names::kSoftmax);
  TOWER_RETURN_IF_ERROR(CheckFloat("Softmax", "logits", logits));
  TOWER_RETURN_IF_ERROR(CheckRank("Softmax", "logits", logits, 2));
  return RunSingle(kOp, {&logits}, OutputSpec{logits.shape()});
}

StatusOr<Tensor> SoftmaxGrad(const Tensor& dy, const Tensor& y) {
  static const OpKernels& kOp = KernelsOf(op_names::kSoftmaxGrad);
  TOWER_RETURN_IF_ERROR(CheckBinary("SoftmaxGrad", dy, y));
  TOWER_RETURN_IF_ERROR(CheckRank("SoftmaxGrad", "y", y, 2));
  return RunSingle(kOp, {&dy, &y}, OutputSpec{y.shape()});
}

StatusOr<Tensor> MeanSquaredError(const Tensor& pred, const Tensor& target,
                                  int64_t global_batch) {
  static const OpKernels& kOp = KernelsOf(op_names::kMeanSquaredError);
  return Mse(kOp, "MeanSquaredError", pred, target, global_batch, /*grad=*/false);
}

StatusOr<Tensor> MeanSquaredErrorGrad(const Tensor& pred, const Tensor& target,
                                      int64_t global_batch) {
  static const OpKernels& kOp = KernelsOf(op_names::kMeanSquaredErrorGrad);
  return Mse(kOp, "MeanSquaredErrorGrad", pred, target, global_batch, /*grad=*/true);
}

StatusOr<Tensor> SparseSoftmaxCrossEntropy(const Tensor& logits, const Tensor& labels,
                                           int64_t global_batch, bool labels_checked) {
  static const OpKernels& kOp = KernelsOf(op_names::kSparseSoftmaxCrossEntropy);
  return CrossEntropy(kOp, "SparseSoftmaxCrossEntropy", logits, labels, global_batch, false,
                      labels_checked);
}

StatusOr<Tensor> SparseSoftmaxCrossEntropyGrad(const Tensor& logits, const Tensor& labels,
                                               int64_t global_batch, bool labels_checked) {
  static const OpKernels& kOp = KernelsOf(op_names::kSparseSoftmaxCrossEntropyGrad);
  return CrossEntropy(kOp, "SparseSoftmaxCrossEntropyGrad", logits, labels, global_batch, true,
                      labels_checked);
}

}  // namespace tower::ops
