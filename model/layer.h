// Layer: one stage of a sequential model, with its own forward and backward pass (dense
// networks need no general autodiff). A layer object serves every replica: its variables
// hold one copy per replica, and the per-replica, per-step state travels in a LayerCache.
#ifndef TOWER_MODEL_LAYER_H_
#define TOWER_MODEL_LAYER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/initializer.h"
#include "model/variable.h"
#include "ops/tensor.h"
#include "util/span.h"

namespace tower {

// What forward keeps for backward, on the replica's device.
struct LayerCache {
  Tensor input;   // x, in the layer's compute dtype
  Tensor output;  // y
  Tensor kernel;  // a 16-bit layer's kernel for this step (its cast), else empty
};

// Makes the variables of a model: one copy per replica, initialised identically.
class VariableFactory {
 public:
  virtual ~VariableFactory() = default;
  virtual StatusOr<Variable*> Create(const std::string& name, const Shape& shape,
                                     const Initializer& initializer, bool trainable) = 0;
};

class Layer {
 public:
  virtual ~Layer() = default;

  // "Dense(64, relu)".
  virtual std::string Describe() const = 0;
  // Creates the variables for inputs of `input_dim` features; `index` is the layer's
  // position, used in variable names ("layers.{index}.kernel"). Invalid settings (an
  // unknown activation, zero units) are reported here.
  virtual Status Build(int64_t input_dim, int index, VariableFactory& factory) = 0;
  virtual int64_t output_dim() const = 0;
  // The trainable variables, in a fixed order (gradients come in the same order).
  virtual std::vector<Variable*> variables() const = 0;

  // y = layer(x) on `replica`'s copies; x[n, input_dim] -> y[n, output_dim]. Where replicas
  // are batched (Distribution::RunOnReplicaBatches), `replica` is a batch's first replica
  // and x holds the rows of every replica of its batch.
  virtual StatusOr<Tensor> Forward(int replica, const Tensor& x, LayerCache* cache) = 0;
  // Given dL/dy, appends dL/dv for each variable (in variables() order) to `grads` and
  // returns dL/dx — or an empty handle when `need_input_grad` is false (the first layer).
  virtual StatusOr<Tensor> Backward(int replica, const Tensor& dy, const LayerCache& cache,
                                    bool need_input_grad, std::vector<Tensor>* grads) = 0;
  // Backward for a replica whose gradients are added into running sums (one per variable,
  // in variables() order, float32, each shaped as its variable: another replica's
  // gradients so far, strategy/reducers/gradient_folding.h; null where not ready). For each
  // variable
  // the layer either adds its gradient into the sum and appends the sum itself to `grads`,
  // or appends a new gradient as Backward does (the caller adds it; always for a null sum). Adding in place spares a zeroed buffer
  // and a pass over it; Dense does it for its kernel. By default: Backward.
  virtual StatusOr<Tensor> BackwardAddingInto(int replica, const Tensor& dy,
                                              const LayerCache& cache, bool need_input_grad,
                                              Span<Tensor* const> sums,
                                              std::vector<Tensor>* grads) {
    return Backward(replica, dy, cache, need_input_grad, grads);
  }

  // The dtype to compute in (model/precision.h): float32, or a mixed policy's 16-bit type.
  // Layers that always compute in float32 ignore it (and take any input dtype).
  virtual void set_compute_dtype(DType dtype) {}

  // Non-zero: until it is set again, the layer's variables hold the same values in every
  // pass, on every replica, so a weight may be packed once for all the replicas
  // (ops::MatMulByWeight). The model's step sets a new version for each step whose replicas
  // share variables, and 0 after it. Layers without weights ignore it.
  virtual void set_weights_version(uint64_t version) {}
};

}  // namespace tower

#endif  // TOWER_MODEL_LAYER_H_
