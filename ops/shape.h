// Shape: the dimensions of a tensor, row-major, up to 6 of them, stored inline (building a
// shape never allocates: ops build several per call).
#ifndef TOWER_OPS_SHAPE_H_
#define TOWER_OPS_SHAPE_H_

#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "util/check.h"
#include "util/statusor.h"

namespace tower {

class Shape {
 public:
  static constexpr int kMaxRank = 6;

  // A scalar: rank 0, one element.
  Shape() = default;
  // Dimensions written in code; a negative dimension or rank > 6 is a programming error.
  Shape(std::initializer_list<int64_t> dims);  // NOLINT: Shape s = {2, 3};
  // Dimensions from data (files, flags): bad ones are InvalidArgument.
  static StatusOr<Shape> FromVector(const std::vector<int64_t>& dims);

  int rank() const { return rank_; }
  int64_t dim(int i) const {
    if (__builtin_expect(i < 0 || i >= rank_, 0)) internal::IndexOutOfRange("Shape dim", i, rank_);
    return dims_[i];
  }
  int64_t num_elements() const;
  // Product of every dimension but the first: the size of one row of a batch.
  int64_t row_size() const;
  // The same shape with the first dimension replaced (a batch of another size).
  Shape WithFirstDim(int64_t first) const;
  // The same shape without its first dimension (rank >= 1): one row of a batch.
  Shape WithoutFirstDim() const;
  std::vector<int64_t> dims() const { return std::vector<int64_t>(dims_.begin(), dims_.begin() + rank_); }

  // "[2, 3]"; a scalar is "[]".
  std::string ToString() const;
  // "(2, 3)", as TensorFlow prints shapes.
  std::string ToTupleString() const;

  friend bool operator==(const Shape& a, const Shape& b);
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Shape& shape);

}  // namespace tower

#endif  // TOWER_OPS_SHAPE_H_
