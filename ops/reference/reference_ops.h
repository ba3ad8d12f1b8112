// Plain reference implementations of every op: host vectors, straightforward loops, double
// accumulation. Kernels (ops/cpu, ops/cuda) are tested against these; nothing else uses them.
//
// Shapes follow the ops: x[n, d] means n rows of d values, row-major.
#ifndef TOWER_OPS_REFERENCE_REFERENCE_OPS_H_
#define TOWER_OPS_REFERENCE_REFERENCE_OPS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "ops/dtype.h"
#include "ops/op_attrs.h"
#include "ops/shape.h"

namespace tower::reference {

using Values = std::vector<float>;

// a[m, k] (or [k, m] transposed) · b[k, n] (or [n, k]) -> [m, n].
Values MatMul(const Values& a, const Shape& a_shape, const Values& b, const Shape& b_shape,
              bool transpose_a, bool transpose_b);
// x[n, c] + bias[c].
Values BiasAdd(const Values& x, const Shape& x_shape, const Values& bias);
Values Add(const Values& a, const Values& b);
Values Sub(const Values& a, const Values& b);
Values Mul(const Values& a, const Values& b);
Values Scale(const Values& x, float alpha);
Values ClipByValue(const Values& x, float min, float max);
Values Axpy(float alpha, const Values& x, const Values& y);
Values AddN(const std::vector<Values>& inputs);
Values ReduceSum(const Values& x, const Shape& shape, attrs::ReduceAxis axis);
Values ReduceMean(const Values& x, const Shape& shape, attrs::ReduceAxis axis);

Values Relu(const Values& x);
Values ReluGrad(const Values& dy, const Values& x);
Values Sigmoid(const Values& x);
Values SigmoidGrad(const Values& dy, const Values& y);  // y = sigmoid(x)
Values Tanh(const Values& x);
Values TanhGrad(const Values& dy, const Values& y);  // y = tanh(x)
// Row-wise over logits[n, c].
Values Softmax(const Values& logits, const Shape& shape);
Values SoftmaxGrad(const Values& dy, const Values& y, const Shape& shape);
// scale · Σ (pred − target)²; returns one value.
Values MeanSquaredError(const Values& pred, const Values& target, float scale);
Values MeanSquaredErrorGrad(const Values& pred, const Values& target, float scale);
// scale · Σ_i (logsumexp(logits_i) − logits_i[label_i]); returns one value.
Values SparseSoftmaxCrossEntropy(const Values& logits, const Shape& shape,
                                 const std::vector<int32_t>& labels, float scale);
Values SparseSoftmaxCrossEntropyGrad(const Values& logits, const Shape& shape,
                                     const std::vector<int32_t>& labels, float scale);

Values Concat(const std::vector<Values>& inputs);  // along the first dimension
Values Fill(int64_t n, float value);
// Philox4x32-10 of one counter under one key, written independently of the kernels'
// (util/philox.h) and checked against the published known answers (tests/ops/random_test).
std::array<uint32_t, 4> Philox4x32_10(std::array<uint32_t, 4> counter,
                                      std::array<uint32_t, 2> key);
// Bitwise what RandomUniform gives.
Values RandomUniform(int64_t n, const attrs::Random& random);
// Within float rounding of what RandomNormal gives (the C library's log and cos).
Values RandomNormal(int64_t n, const attrs::Random& random);
// Cast: values as float, converted to `to` and back (what the stored values read as),
// computed by rounding the value arithmetically, not with ops/dtype's conversions.
Values CastRoundTrip(const Values& x, DType to);
// One value rounded once (to nearest even) to `to`'s precision and range, arithmetically as
// CastRoundTrip does; float32 and int32 as CastRoundTrip (x's float, then that).
float RoundToDType(double x, DType to);

// Mixed precision: the ops above in double and unrounded, for inputs of any dtype (given as
// the floats they hold). A 16-bit kernel's result is compared with RoundToDType of these:
// the exact value (Relu, ReluGrad: a selection; BiasAdd, ReduceSum: sums of floats, exact in
// double for moderate exponent ranges), or within double's error of it (sigmoid and tanh,
// the products of the gradients).
using Doubles = std::vector<double>;
Doubles ReluInDouble(const Values& x);
Doubles ReluGradInDouble(const Values& dy, const Values& x);
Doubles SigmoidInDouble(const Values& x);
Doubles SigmoidGradInDouble(const Values& dy, const Values& y);
Doubles TanhInDouble(const Values& x);
Doubles TanhGradInDouble(const Values& dy, const Values& y);
Doubles BiasAddInDouble(const Values& x, const Shape& x_shape, const Values& bias);
// Σ x (or, with `absolute`, Σ |x|: the scale of a sum's rounding error) over every element
// or along the batch, in row order.
Doubles ReduceSumInDouble(const Values& x, const Shape& shape, attrs::ReduceAxis axis,
                          bool absolute = false);

// Updates var (and velocity) in place, as attrs::Sgd documents; plain SGD without velocity
// (nullptr).
void ApplySgd(Values* var, Values* velocity, const Values& grad, const attrs::Sgd& sgd);

// Updates var, m and v in place, as attrs::Adam documents.
void ApplyAdam(Values* var, Values* m, Values* v, const Values& grad, const attrs::Adam& adam);

}  // namespace tower::reference

#endif  // TOWER_OPS_REFERENCE_REFERENCE_OPS_H_
