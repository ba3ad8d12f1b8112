// Eigen views over tensor buffers (no copies), for the CPU kernels. Tensors are row-major.
#ifndef TOWER_OPS_CPU_EIGEN_H_
#define TOWER_OPS_CPU_EIGEN_H_

#include <Eigen/Core>

#include "ops/tensor.h"

namespace tower::cpu {

using RowMajorMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMajorMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMajorMatrix>;
using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

// Every element, as a flat array.
inline ConstArrayMap Flat(const Tensor& t) { return ConstArrayMap(t.data<float>(), t.num_elements()); }
inline ArrayMap MutableFlat(const Tensor& t) { return ArrayMap(t.data<float>(), t.num_elements()); }

// A rank-2 view: [rows, cols].
inline ConstMatrixMap Matrix(const Tensor& t, int64_t rows, int64_t cols) {
  return ConstMatrixMap(t.data<float>(), rows, cols);
}
inline MatrixMap MutableMatrix(const Tensor& t, int64_t rows, int64_t cols) {
  return MatrixMap(t.data<float>(), rows, cols);
}

// [first dimension, everything else]: how batch-wise kernels see any tensor of rank >= 1.
inline int64_t Rows(const Tensor& t) { return t.shape().rank() == 0 ? 1 : t.shape().dim(0); }
inline int64_t Cols(const Tensor& t) { return t.shape().rank() == 0 ? 1 : t.shape().row_size(); }

}  // namespace tower::cpu

#endif  // TOWER_OPS_CPU_EIGEN_H_
