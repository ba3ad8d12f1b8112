#include "ops/math_ops.h"

#include "ops/cpu/cpu_kernels.h"
#include "ops/eager.h"
#include "ops/op_checks.h"
#include "ops/op_names.h"

namespace tower::ops {

using internal::CheckBinary;
using internal::CheckFloat;
using internal::CheckFloating;
using internal::CheckRank;

namespace {

// op(a) · op(b)'s shape [m, n], for rank-2 a and b whose inner dimensions agree.
StatusOr<Shape> ProductShape(const char* op, const Tensor& a, const Tensor& b, bool transpose_a,
                             bool transpose_b) {
  TOWER_RETURN_IF_ERROR(CheckRank(op, "a", a, 2));
  TOWER_RETURN_IF_ERROR(CheckRank(op, "b", b, 2));
  const int64_t m = transpose_a ? a.shape().dim(1) : a.shape().dim(0);
  const int64_t ka = transpose_a ? a.shape().dim(0) : a.shape().dim(1);
  const int64_t kb = transpose_b ? b.shape().dim(1) : b.shape().dim(0);
  const int64_t n = transpose_b ? b.shape().dim(0) : b.shape().dim(1);
  if (ka != kb) {
    return InvalidArgumentError(
        std::string(op) + ": inner dimensions differ: a " + a.shape().ToString() +
        (transpose_a ? " (transposed)" : "") + " and b " + b.shape().ToString() +
        (transpose_b ? " (transposed)" : "") + " give " + std::to_string(ka) + " vs " +
        std::to_string(kb));
  }
  return Shape{m, n};
}

// MatMul's checks and kernel, for MatMul and MatMulByWeight.
StatusOr<Tensor> RunMatMul(const Tensor& a, const Tensor& b, const attrs::MatMul& attrs,
                           DType out) {
  static const OpKernels& kOp = KernelsOf(op_names::kMatMul);
  TOWER_RETURN_IF_ERROR(internal::CheckValid("MatMul", "a", a));
  TOWER_RETURN_IF_ERROR(internal::CheckValid("MatMul", "b", b));
  const bool half = a.dtype() == DType::kBFloat16 || a.dtype() == DType::kFloat16;
  if ((a.dtype() != DType::kFloat32 && !half) || b.dtype() != a.dtype() ||
      (out != a.dtype() && !(half && out == DType::kFloat32))) {
    return InvalidArgumentError(
        "MatMul: a and b must both be float32, both bfloat16 or both float16, with a float32 "
        "or like-typed result; got " + std::string(DTypeName(a.dtype())) + " · " +
        std::string(DTypeName(b.dtype())) + " -> " + std::string(DTypeName(out)));
  }
  TOWER_ASSIGN_OR_RETURN(const Shape product, ProductShape("MatMul", a, b, attrs.transpose_a,
                                                           attrs.transpose_b));
  return RunSingle(kOp, {&a, &b}, OutputSpec{product, out}, &attrs);
}

}  // namespace

StatusOr<Tensor> MatMul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  TOWER_RETURN_IF_ERROR(internal::CheckValid("MatMul", "a", a));
  return MatMul(a, b, transpose_a, transpose_b, a.dtype());
}

StatusOr<Tensor> MatMul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                        DType out) {
  return RunMatMul(a, b, attrs::MatMul{transpose_a, transpose_b}, out);
}

StatusOr<Tensor> MatMulByWeight(const Tensor& x, const Tensor& weight, bool transpose_weight,
                                uint64_t weight_version) {
  TOWER_RETURN_IF_ERROR(internal::CheckValid("MatMul", "a", x));
  return RunMatMul(x, weight, attrs::MatMul{false, transpose_weight, weight_version},
                   x.dtype());
}

StatusOr<Tensor> FusedMatMul(const Tensor& x, const Tensor& weight, const Tensor& bias,
                             FusedActivation activation, bool transpose_weight,
                             uint64_t weight_version) {
  static const OpKernels& kOp = KernelsOf(op_names::kFusedMatMul);
  TOWER_RETURN_IF_ERROR(CheckFloat("FusedMatMul", "x", x));
  TOWER_RETURN_IF_ERROR(CheckFloat("FusedMatMul", "weight", weight));
  TOWER_ASSIGN_OR_RETURN(const Shape product, ProductShape("FusedMatMul", x, weight,
                                                           /*transpose_a=*/false,
                                                           transpose_weight));
  const attrs::FusedMatMul attrs{attrs::MatMul{false, transpose_weight, weight_version},
                                 bias.valid(), activation};
  if (!bias.valid()) return RunSingle(kOp, {&x, &weight}, OutputSpec{product}, &attrs);
  TOWER_RETURN_IF_ERROR(CheckFloat("FusedMatMul", "bias", bias));
  TOWER_RETURN_IF_ERROR(CheckRank("FusedMatMul", "bias", bias, 1));
  if (bias.shape().dim(0) != product.dim(1)) {
    return ShapeError("FusedMatMul", "the bias size must equal the product's columns; got",
                      product, bias.shape());
  }
  return RunSingle(kOp, {&x, &weight, &bias}, OutputSpec{product}, &attrs);
}

Status MatMulAddInto(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                     Tensor& sum) {
  static const OpKernels& kOp = KernelsOf(op_names::kMatMulAdd);
  TOWER_RETURN_IF_ERROR(CheckFloat("MatMulAdd", "a", a));
  TOWER_RETURN_IF_ERROR(CheckFloat("MatMulAdd", "b", b));
  TOWER_RETURN_IF_ERROR(CheckFloat("MatMulAdd", "sum", sum));
  TOWER_ASSIGN_OR_RETURN(const Shape product, ProductShape("MatMulAdd", a, b, transpose_a,
                                                           transpose_b));
  if (sum.shape() != product) {
    return InvalidArgumentError("MatMulAdd: a " + a.shape().ToString() +
                                (transpose_a ? " (transposed)" : "") + " and b " +
                                b.shape().ToString() + (transpose_b ? " (transposed)" : "") +
                                " give " + product.ToString() + ", not the sum's shape " +
                                sum.shape().ToString());
  }
  const attrs::MatMul attrs{transpose_a, transpose_b};
  RunOptions options;
  options.pinned = sum.device();  // in place: where the sum lives
  const Tensor* inputs[] = {&a, &b, &sum};
  return RunOp(kOp, inputs, {}, &attrs, {}, options);
}

StatusOr<Tensor> BiasAdd(const Tensor& x, const Tensor& bias) {
  static const OpKernels& kOp = KernelsOf(op_names::kBiasAdd);
  TOWER_RETURN_IF_ERROR(CheckFloating("BiasAdd", "x", x));
  TOWER_RETURN_IF_ERROR(CheckFloating("BiasAdd", "bias", bias));
  // A 16-bit x (mixed precision) takes its layer's float32 bias as well as a like-typed one.
  if (bias.dtype() != DType::kFloat32 && bias.dtype() != x.dtype()) {
    return InvalidArgumentError("BiasAdd: bias must be float32 or of x's dtype, got x " +
                                std::string(DTypeName(x.dtype())) + " and bias " +
                                std::string(DTypeName(bias.dtype())));
  }
  TOWER_RETURN_IF_ERROR(CheckRank("BiasAdd", "bias", bias, 1));
  if (x.shape().rank() < 1 || x.shape().dim(x.shape().rank() - 1) != bias.shape().dim(0)) {
    return ShapeError("BiasAdd", "the last dimension of x must equal the bias size; got",
                      x.shape(), bias.shape());
  }
  return RunSingle(kOp, {&x, &bias}, OutputSpec{x.shape(), x.dtype()});
}

StatusOr<Tensor> Add(const Tensor& a, const Tensor& b) {
  static const OpKernels& kOp = KernelsOf(op_names::kAdd);
  TOWER_RETURN_IF_ERROR(CheckBinary("Add", a, b));
  return RunSingle(kOp, {&a, &b}, OutputSpec{a.shape()});
}

StatusOr<Tensor> Sub(const Tensor& a, const Tensor& b) {
  static const OpKernels& kOp = KernelsOf(op_names::kSub);
  TOWER_RETURN_IF_ERROR(CheckBinary("Sub", a, b));
  return RunSingle(kOp, {&a, &b}, OutputSpec{a.shape()});
}

StatusOr<Tensor> Mul(const Tensor& a, const Tensor& b) {
  static const OpKernels& kOp = KernelsOf(op_names::kMul);
  TOWER_RETURN_IF_ERROR(CheckBinary("Mul", a, b));
  return RunSingle(kOp, {&a, &b}, OutputSpec{a.shape()});
}

StatusOr<Tensor> Scale(const Tensor& x, float alpha) {
  static const OpKernels& kOp = KernelsOf(op_names::kScale);
  TOWER_RETURN_IF_ERROR(CheckFloat("Scale", "x", x));
  const attrs::Scalar attrs{alpha};
  return RunSingle(kOp, {&x}, OutputSpec{x.shape()}, &attrs);
}

StatusOr<Tensor> ClipByValue(const Tensor& x, float min, float max) {
  static const OpKernels& kOp = KernelsOf(op_names::kClipByValue);
  TOWER_RETURN_IF_ERROR(CheckFloat("ClipByValue", "x", x));
  if (!(min <= max)) {
    return InvalidArgumentError("ClipByValue: needs min <= max (neither NaN), got [" +
                                std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  const attrs::ClipByValue attrs{min, max};
  return RunSingle(kOp, {&x}, OutputSpec{x.shape()}, &attrs);
}

void ClipByValueOnHost(const attrs::ClipByValue& clip, const float* x, float* y, int64_t n) {
  cpu::ClipValues(clip, x, y, n);
}

StatusOr<Tensor> Axpy(float alpha, const Tensor& x, const Tensor& y) {
  static const OpKernels& kOp = KernelsOf(op_names::kAxpy);
  TOWER_RETURN_IF_ERROR(CheckBinary("Axpy", x, y));
  const attrs::Scalar attrs{alpha};
  return RunSingle(kOp, {&x, &y}, OutputSpec{x.shape()}, &attrs);
}

StatusOr<Tensor> AddN(const std::vector<Tensor>& inputs) {
  static const OpKernels& kOp = KernelsOf(op_names::kAddN);
  if (inputs.empty()) return InvalidArgumentError("AddN: needs at least one input");
  std::vector<const Tensor*> pointers;
  pointers.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    TOWER_RETURN_IF_ERROR(CheckFloat("AddN", "input " + std::to_string(i), inputs[i]));
    if (inputs[i].shape() != inputs[0].shape()) {
      return ShapeError("AddN", "input " + std::to_string(i) + " differs in shape:",
                        inputs[0].shape(), inputs[i].shape());
    }
    pointers.push_back(&inputs[i]);
  }
  return RunSingle(kOp, pointers, OutputSpec{inputs[0].shape()});
}

namespace {

StatusOr<Tensor> Reduce(const OpKernels& op, const char* name, const Tensor& x,
                        ReduceAxis axis) {
  TOWER_RETURN_IF_ERROR(CheckFloating(name, "x", x));  // the output is float32 for any
  Shape out_shape;  // scalar
  if (axis == ReduceAxis::kBatch && x.shape().rank() > 1) out_shape = x.shape().WithoutFirstDim();
  const attrs::Reduce attrs{axis};
  return RunSingle(op, {&x}, OutputSpec{out_shape}, &attrs);
}

}  // namespace

StatusOr<Tensor> ReduceSum(const Tensor& x, ReduceAxis axis) {
  static const OpKernels& kOp = KernelsOf(op_names::kReduceSum);
  return Reduce(kOp, "ReduceSum", x, axis);
}

StatusOr<Tensor> ReduceMean(const Tensor& x, ReduceAxis axis) {
  static const OpKernels& kOp = KernelsOf(op_names::kReduceMean);
  return Reduce(kOp, "ReduceMean", x, axis);
}

}  // namespace tower::ops
