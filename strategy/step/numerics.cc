#include "strategy/step/numerics.h"

#include <cmath>
#include <string>

#include "ops/math_ops.h"

namespace tower {
namespace {

// Σ x² over `tensor`, in double on the host for host memory, else by the device's kernels.
StatusOr<double> SumOfSquares(const Tensor& tensor) {
  if (tensor.device()->stream().host_addressable()) {
    const float* x = tensor.data<float>();
    double sum = 0;
    for (int64_t i = 0; i < tensor.num_elements(); ++i) sum += double{x[i]} * x[i];
    return sum;
  }
  TOWER_ASSIGN_OR_RETURN(Tensor squares, ops::Mul(tensor, tensor));
  TOWER_ASSIGN_OR_RETURN(Tensor total, ops::ReduceSum(squares));
  float sum = 0;
  TOWER_RETURN_IF_ERROR(total.ToHostBytes(&sum));
  return double{sum};
}

}  // namespace

StatusOr<std::optional<NonFinite>> FirstNonFinite(const Tensor& tensor) {
  if (tensor.dtype() != DType::kFloat32) {
    return InvalidArgumentError("looking for NaN and Inf: the tensor must be float32, got " +
                                std::string(DTypeName(tensor.dtype())));
  }
  std::vector<float> copy;
  const float* x = nullptr;
  if (tensor.device()->stream().host_addressable()) {
    x = tensor.data<float>();
  } else {
    TOWER_ASSIGN_OR_RETURN(copy, tensor.ToHost());
    x = copy.data();
  }
  // A sum, not a branch per element: NaN and Inf survive it (x − x is NaN for both).
  float poison = 0;
  for (int64_t i = 0; i < tensor.num_elements(); ++i) poison += x[i] - x[i];
  if (poison == 0) return std::optional<NonFinite>();
  for (int64_t i = 0; i < tensor.num_elements(); ++i) {
    if (!std::isfinite(x[i])) return std::optional<NonFinite>(NonFinite{i, std::isnan(x[i])});
  }
  return std::optional<NonFinite>();
}

StatusOr<bool> AllFinite(const std::vector<Tensor>& tensors) {
  for (const Tensor& tensor : tensors) {
    TOWER_ASSIGN_OR_RETURN(std::optional<NonFinite> found, FirstNonFinite(tensor));
    if (found.has_value()) return false;
  }
  return true;
}

StatusOr<double> GlobalNorm(const std::vector<Tensor>& tensors) {
  double squares = 0;
  for (const Tensor& tensor : tensors) {
    TOWER_ASSIGN_OR_RETURN(double sum, SumOfSquares(tensor));
    squares += sum;
  }
  return std::sqrt(squares);
}

Status CheckLossIsOneFloat(const Tensor& loss) {
  if (loss.num_elements() != 1 || loss.dtype() != DType::kFloat32) {
    return InternalError("the loss is not one float32 value: " + loss.shape().ToString());
  }
  return OkStatus();
}

}  // namespace tower
