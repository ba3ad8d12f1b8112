// Argument checks shared by the op entry points. Each returns InvalidArgument naming the
// op, the argument and, for shapes, both shapes.
#ifndef TOWER_OPS_OP_CHECKS_H_
#define TOWER_OPS_OP_CHECKS_H_

#include <string>
#include <string_view>

#include "ops/tensor.h"

namespace tower::internal {

inline Status CheckValid(std::string_view op, std::string_view name, const Tensor& t) {
  if (t.valid()) return OkStatus();
  return InvalidArgumentError(std::string(op) + ": " + std::string(name) +
                              " is an empty Tensor handle");
}

inline Status CheckFloat(std::string_view op, std::string_view name, const Tensor& t) {
  TOWER_RETURN_IF_ERROR(CheckValid(op, name, t));
  return CheckDType(op, name, t, DType::kFloat32);
}

// float32, bfloat16 or float16: the inputs of the ops that mixed precision (Keras's
// mixed_bfloat16 and mixed_float16 policies) runs in 16 bits on the CPU.
inline Status CheckFloating(std::string_view op, std::string_view name, const Tensor& t) {
  TOWER_RETURN_IF_ERROR(CheckValid(op, name, t));
  const DType dtype = t.dtype();
  if (dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16) {
    return OkStatus();
  }
  return InvalidArgumentError(std::string(op) + ": " + std::string(name) +
                              " must be float32, bfloat16 or float16, got " +
                              std::string(DTypeName(dtype)) + " (use Cast)");
}

// Two inputs of one dtype (the 16-bit kernels take no mixed inputs).
inline Status CheckSameDType(std::string_view op, std::string_view name_a, const Tensor& a,
                             std::string_view name_b, const Tensor& b) {
  if (a.dtype() == b.dtype()) return OkStatus();
  return InvalidArgumentError(std::string(op) + ": " + std::string(name_a) + " and " +
                              std::string(name_b) + " must have the same dtype, got " +
                              std::string(DTypeName(a.dtype())) + " and " +
                              std::string(DTypeName(b.dtype())) + " (use Cast)");
}

inline Status CheckSameShape(std::string_view op, const Tensor& a, const Tensor& b) {
  if (a.shape() == b.shape()) return OkStatus();
  return ShapeError(op, "incompatible shapes", a.shape(), b.shape());
}

inline Status CheckRank(std::string_view op, std::string_view name, const Tensor& t, int rank) {
  if (t.shape().rank() == rank) return OkStatus();
  return InvalidArgumentError(std::string(op) + ": " + std::string(name) + " must have rank " +
                              std::to_string(rank) + ", got shape " + t.shape().ToString());
}

// Both float32 and of one shape: the check of every elementwise binary op.
inline Status CheckBinary(std::string_view op, const Tensor& a, const Tensor& b) {
  TOWER_RETURN_IF_ERROR(CheckFloat(op, "the first input", a));
  TOWER_RETURN_IF_ERROR(CheckFloat(op, "the second input", b));
  return CheckSameShape(op, a, b);
}

}  // namespace tower::internal

#endif  // TOWER_OPS_OP_CHECKS_H_
