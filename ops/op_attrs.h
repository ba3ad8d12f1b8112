// Attribute structs of the ops: what a kernel needs besides its inputs. Shared by the CPU,
// CUDA and reference implementations; plain data, usable from CUDA code.
#ifndef TOWER_OPS_OP_ATTRS_H_
#define TOWER_OPS_OP_ATTRS_H_

#include <cstdint>

#include "ops/dtype.h"

namespace tower::attrs {

// MatMul: c[m, n] = op(a) · op(b), op = transpose or not.
struct MatMul {
  bool transpose_a = false;
  bool transpose_b = false;
  // Non-zero: b is a weight that holds the same values in every product with this version, on
  // any thread, so a kernel may keep its packing for the others (ops::MatMulByWeight).
  uint64_t b_version = 0;
};

// FusedMatMul: y = f(x · op(weight) + bias), the bias optional, f the identity or Relu:
// MatMul, BiasAdd and Relu in one op, bit for bit the three (Grappler's _FusedMatMul). A
// CPU kernel applies the bias and f to each block of the product right after its last depth
// block, while the block is in cache, instead of two more passes over the output.
enum class FusedActivation : uint8_t { kNone, kRelu };
struct FusedMatMul {
  MatMul matmul;  // transpose_a is false: x is [m, k]
  bool has_bias = false;
  FusedActivation activation = FusedActivation::kNone;
};

// Scale (y = alpha·x), Axpy (z = alpha·x + y), Fill (value).
struct Scalar {
  float value = 0;
};

// ClipByValue: y = x below `min` → min, above `max` → max, else x (NaN stays NaN).
struct ClipByValue {
  float min = 0;
  float max = 0;
};

// ReduceSum / ReduceMean over every element ([...] -> []) or along the batch, the first
// dimension ([n, ...] -> [...]).
enum class ReduceAxis : uint8_t { kAll, kBatch };
struct Reduce {
  ReduceAxis axis = ReduceAxis::kAll;
};

// Losses: the sum over the batch is multiplied by `scale` = 1 / (global batch [· features]),
// so N replicas' losses and gradients add up to one device's on the global batch.
struct Loss {
  float scale = 1;
  // Sparse cross-entropy: the caller has checked every label is in [0, classes) (the model
  // does, on the host, before the upload), so a GPU kernel need not wait for the device to
  // read its own check back: one host synchronisation less per op in the training step.
  bool labels_checked = false;
};

// RandomUniform: values in [a, b). RandomNormal: mean a, standard deviation b.
struct Random {
  uint64_t seed = 0;
  float a = 0;
  float b = 1;
};

struct Cast {
  DType to = DType::kFloat32;
};

// Keras's SGD (optimizer_v2): velocity = momentum·velocity − lr·grad; var += velocity;
// Nesterov: var += momentum·velocity − lr·grad. With momentum 0: var −= lr·grad.
struct Sgd {
  float learning_rate = 0.01f;
  float momentum = 0;
  bool nesterov = false;
};

// TensorFlow's Adam (ResourceApplyAdam, what Keras uses), at step t (1-based):
//   m = β1·m + (1 − β1)·g;  v = β2·v + (1 − β2)·g²
//   var −= lr·√(1 − β2^t)/(1 − β1^t) · m / (√v + ε)
// The host computes `alpha` = lr·√(1 − β2^t)/(1 − β1^t) in double.
// AdamW (decoupled weight decay, Loshchilov & Hutter; Keras's AdamW): first
//   var −= decay·var,  decay = lr·weight_decay (the host computes it in double),
// then the Adam step above. decay 0 is plain Adam, bit for bit.
struct Adam {
  float alpha = 0.001f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-7f;
  float decay = 0;
};

}  // namespace tower::attrs

#endif  // TOWER_OPS_OP_ATTRS_H_
