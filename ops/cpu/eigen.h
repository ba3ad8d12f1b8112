// Eigen views over tensor buffers (no copies), for the CPU kernels. Tensors are row-major.
// 16-bit tensors (mixed precision) are seen as blocks of floats: Elementwise16.
#ifndef TOWER_OPS_CPU_EIGEN_H_
#define TOWER_OPS_CPU_EIGEN_H_

#include <Eigen/Core>

#include <algorithm>
#include <array>
#include <cstdint>

#include "ops/cpu/cpu_kernels.h"
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

// Relu's arithmetic, max(x, 0) as Eigen's max takes it (a NaN stays NaN, -0 stays -0): the
// one expression of the Relu kernels and of the fused products' epilogue (ops/cpu/gemm.h),
// so that their bits cannot drift apart.
template <typename Expression>
auto ReluOf(const Expression& x) {
  return x.max(0.0f);
}

// ---- 16-bit tensors as float.
// The kernels of 16-bit tensors (bfloat16, float16) compute in float: each element of every
// input is widened to float (exact), the float32 kernel's arithmetic runs on it, and the
// result is rounded once to the output's type (nearest even). Elementwise16 owns that
// load / compute / store, a block at a time.

// Floats per block (4 KiB): a multiple of 16 floats (64 bytes), and the blocks are 64-byte
// aligned, so an Eigen expression splits a block into vector and scalar parts as it splits a
// whole float32 tensor (256-byte aligned, device/memory_source.h): each element is computed
// by the same code, hence to the same bits, as the float32 kernel computes it on a tensor.
inline constexpr int64_t k16BitBlock = 1024;

// `output` and the tensors of `inputs` hold one 16-bit dtype and as many elements, seen as
// rows of `cols` (the activations: one row of everything). Row by row, in blocks of at most
// k16BitBlock columns, calls
//   compute(in, out, col, size)
// with in[k] pointing to the `size` floats of input k for columns [col, col + size) of the
// row, to write the `size` floats of the result at `out`.
template <size_t kInputs, typename Compute>
void Elementwise16(const std::array<const Tensor*, kInputs>& inputs, const Tensor& output,
                   int64_t cols, const Compute& compute) {
  const DType dtype = output.dtype();
  for (const Tensor* input : inputs) {
    TOWER_CHECK(input->dtype() == dtype && input->num_elements() == output.num_elements())
        << "Elementwise16: a " << DTypeName(input->dtype()) << " input for a "
        << DTypeName(dtype) << " output";
  }
  alignas(64) float in[kInputs][k16BitBlock];
  alignas(64) float out[k16BitBlock];
  const float* in_blocks[kInputs];
  for (size_t k = 0; k < kInputs; ++k) in_blocks[k] = in[k];
  const int64_t rows = cols == 0 ? 0 : output.num_elements() / cols;
  uint16_t* y = static_cast<uint16_t*>(output.raw_data());
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t col = 0; col < cols; col += k16BitBlock) {
      const int64_t size = std::min(k16BitBlock, cols - col);
      const int64_t offset = row * cols + col;
      for (size_t k = 0; k < kInputs; ++k) {
        WidenToFloat(dtype, static_cast<const uint16_t*>(inputs[k]->raw_data()) + offset, in[k],
                     size);
      }
      compute(in_blocks, out, col, size);
      NarrowFromFloat(dtype, out, y + offset, size);
    }
  }
}

}  // namespace tower::cpu

#endif  // TOWER_OPS_CPU_EIGEN_H_
