// Ops that make, convert, split and join tensors.
//
// Creation ops take an optional device; without one they are placed like any op: the
// current DeviceScope, else the first GPU, else CPU:0 (of Context::Default()).
#ifndef TOWER_OPS_ARRAY_OPS_H_
#define TOWER_OPS_ARRAY_OPS_H_

#include <cstdint>
#include <vector>

#include "ops/tensor.h"

namespace tower::ops {

// A tensor holding `values` (TensorFlow's tf.constant; logged as "_EagerConst").
StatusOr<Tensor> Constant(const std::vector<float>& values, const Shape& shape,
                          Device* device = nullptr);
StatusOr<Tensor> ConstantInt32(const std::vector<int32_t>& values, const Shape& shape,
                               Device* device = nullptr);
StatusOr<Tensor> Fill(const Shape& shape, float value, Device* device = nullptr);
StatusOr<Tensor> Zeros(const Shape& shape, Device* device = nullptr);

// Converts between float32, float16, bfloat16 and int32 (float -> int rounds toward zero
// and saturates; NaN -> 0). CPU kernel only, as in TensorFlow: asked for on a GPU it runs
// on the CPU, and the placement log says so.
StatusOr<Tensor> Cast(const Tensor& x, DType to);

// Rows of x in consecutive pieces of the given sizes (which must add up to x's first
// dimension). The pieces are views of x: no copy.
StatusOr<std::vector<Tensor>> Split(const Tensor& x, const std::vector<int64_t>& sizes);
// `parts` pieces whose sizes differ by at most one, the larger ones first
// (10 rows in 4 parts: 3, 3, 2, 2).
StatusOr<std::vector<Tensor>> SplitEvenly(const Tensor& x, int64_t parts);
std::vector<int64_t> EvenSplitSizes(int64_t rows, int64_t parts);
// Joins tensors along the first dimension (the other dimensions and dtypes must agree).
StatusOr<Tensor> Concat(const std::vector<Tensor>& inputs);

}  // namespace tower::ops

#endif  // TOWER_OPS_ARRAY_OPS_H_
