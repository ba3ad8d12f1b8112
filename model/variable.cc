#include "model/variable.h"

#include <utility>

namespace tower {

Variable::Variable(std::string name, std::vector<Tensor> copies, bool trainable)
    : name_(std::move(name)), copies_(std::move(copies)), trainable_(trainable) {
  TOWER_CHECK(!copies_.empty()) << "variable " << name_ << " needs at least one copy";
  for (const Tensor& copy : copies_) {
    TOWER_CHECK(copy.valid() && copy.shape() == copies_.front().shape() &&
                copy.dtype() == copies_.front().dtype())
        << "copies of variable " << name_ << " differ";
  }
}

StatusOr<std::vector<float>> Variable::Read() const { return copies_.front().ToHost(); }

Status Variable::Assign(const std::vector<float>& values) {
  if (static_cast<int64_t>(values.size()) != shape().num_elements()) {
    return InvalidArgumentError("variable " + name_ + " has shape " + shape().ToString() +
                                " (" + std::to_string(shape().num_elements()) +
                                " values), got " + std::to_string(values.size()) + " values");
  }
  if (dtype() != DType::kFloat32) {
    return InvalidArgumentError("variable " + name_ + " is not float32");
  }
  for (Tensor& copy : copies_) {
    TOWER_RETURN_IF_ERROR(copy.device()->stream().CopyFromHost(copy.raw_data(), values.data(),
                                                               copy.bytes()));
  }
  return OkStatus();
}

}  // namespace tower
