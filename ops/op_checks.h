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
