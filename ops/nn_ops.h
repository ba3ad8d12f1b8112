// Neural-network ops: activations with their gradients, softmax, and the two losses.
//
// Losses are sums over the rows given, divided by the *global* batch size (and, for MSE,
// the number of outputs per row), so that the losses and gradients of N replicas, each on
// its shard, add up to those of one device on the whole batch. `global_batch` defaults to
// the batch's own size (one device).
#ifndef TOWER_OPS_NN_OPS_H_
#define TOWER_OPS_NN_OPS_H_

#include <cstdint>

#include "ops/tensor.h"

namespace tower::ops {

// The activations and their gradients take float32, bfloat16 or float16 inputs, all of one
// dtype, and give that dtype. 16-bit inputs (mixed precision; CPU kernels only) are computed
// in float32 as float32 inputs are, the result rounded once to nearest even.
StatusOr<Tensor> Relu(const Tensor& x);
// dy · (x > 0).
StatusOr<Tensor> ReluGrad(const Tensor& dy, const Tensor& x);
StatusOr<Tensor> Sigmoid(const Tensor& x);
// dy · y · (1 − y), with y = Sigmoid(x).
StatusOr<Tensor> SigmoidGrad(const Tensor& dy, const Tensor& y);
StatusOr<Tensor> Tanh(const Tensor& x);
// dy · (1 − y²), with y = Tanh(x).
StatusOr<Tensor> TanhGrad(const Tensor& dy, const Tensor& y);
// Row-wise softmax of logits[n, c].
StatusOr<Tensor> Softmax(const Tensor& logits);
// Its gradient: dx_ij = y_ij · (dy_ij − Σ_k dy_ik · y_ik), with y = Softmax(x).
StatusOr<Tensor> SoftmaxGrad(const Tensor& dy, const Tensor& y);

// Keras's mean squared error: Σ (pred − target)² / (global_batch · d) for pred[n, d]
// (or pred[n]: d = 1); a scalar.
StatusOr<Tensor> MeanSquaredError(const Tensor& pred, const Tensor& target,
                                  int64_t global_batch = -1);
// Its gradient with respect to pred: 2 (pred − target) / (global_batch · d).
StatusOr<Tensor> MeanSquaredErrorGrad(const Tensor& pred, const Tensor& target,
                                      int64_t global_batch = -1);
// Softmax cross-entropy of logits[n, c] with int32 labels[n] in [0, c):
// Σ_i (log Σ_j exp logits_ij − logits_i,label_i) / global_batch; a scalar. A label outside
// [0, c) is InvalidArgument naming its row, which on a GPU costs a wait for the device;
// `labels_checked` = the caller has checked them already (no wait; a bad row then counts 0).
StatusOr<Tensor> SparseSoftmaxCrossEntropy(const Tensor& logits, const Tensor& labels,
                                           int64_t global_batch = -1,
                                           bool labels_checked = false);
// Its gradient with respect to the logits: (softmax − one_hot(label)) / global_batch.
StatusOr<Tensor> SparseSoftmaxCrossEntropyGrad(const Tensor& logits, const Tensor& labels,
                                               int64_t global_batch = -1,
                                               bool labels_checked = false);

}  // namespace tower::ops

#endif  // TOWER_OPS_NN_OPS_H_
