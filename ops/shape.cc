#include "ops/shape.h"

namespace tower {

Shape::Shape(std::initializer_list<int64_t> dims) {
  TOWER_CHECK(dims.size() <= kMaxRank) << "rank " << dims.size() << " > " << kMaxRank;
  for (int64_t d : dims) {
    TOWER_CHECK(d >= 0) << "negative dimension " << d;
    dims_[rank_++] = d;
  }
}

StatusOr<Shape> Shape::FromVector(const std::vector<int64_t>& dims) {
  if (dims.size() > kMaxRank) {
    return InvalidArgumentError("a shape has at most " + std::to_string(kMaxRank) +
                                " dimensions, got " + std::to_string(dims.size()));
  }
  Shape shape;
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgumentError("negative dimension " + std::to_string(d));
    if (d > 0 && elements > (int64_t{1} << 48) / d) {
      return InvalidArgumentError("shape has more than 2^48 elements");
    }
    elements *= d;
    shape.dims_[shape.rank_++] = d;
  }
  return shape;
}

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

int64_t Shape::row_size() const {
  int64_t n = 1;
  for (int i = 1; i < rank_; ++i) n *= dims_[i];
  return n;
}

Shape Shape::WithFirstDim(int64_t first) const {
  TOWER_CHECK(rank_ >= 1 && first >= 0) << "WithFirstDim(" << first << ") of " << ToString();
  Shape shape = *this;
  shape.dims_[0] = first;
  return shape;
}

Shape Shape::WithoutFirstDim() const {
  TOWER_CHECK(rank_ >= 1) << "WithoutFirstDim of a scalar";
  Shape shape;
  shape.rank_ = rank_ - 1;
  for (int i = 1; i < rank_; ++i) shape.dims_[i - 1] = dims_[i];
  return shape;
}

std::string Shape::ToString() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(dims_[i]);
  }
  return out + "]";
}

std::string Shape::ToTupleString() const {
  std::string out = "(";
  for (int i = 0; i < rank_; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(dims_[i]);
  }
  if (rank_ == 1) out += ",";
  return out + ")";
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank_ != b.rank_) return false;
  for (int i = 0; i < a.rank_; ++i) {
    if (a.dims_[i] != b.dims_[i]) return false;
  }
  return true;
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape.ToString(); }

}  // namespace tower
