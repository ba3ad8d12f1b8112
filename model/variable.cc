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
  const void* first = copies_.front().raw_data();
  int same = 0;
  for (const Tensor& copy : copies_) same += copy.raw_data() == first ? 1 : 0;
  TOWER_CHECK(same == 1 || same == num_replicas())
      << "variable " << name_ << ": either every replica shares one copy or none does";
  shared_ = num_replicas() > 1 && same == num_replicas();
}

std::vector<Tensor> Variable::SharedCopies(const Tensor& value, int replicas) {
  std::vector<Tensor> copies = {value};
  for (int r = 1; r < replicas; ++r) copies.push_back(value.WithOwnCounts());
  return copies;
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
    if (shared_ && &copy != &copies_.front()) break;  // one tensor: written once
    TOWER_RETURN_IF_ERROR(copy.device()->stream().CopyFromHost(copy.raw_data(), values.data(),
                                                               copy.bytes()));
  }
  return OkStatus();
}

}  // namespace tower
