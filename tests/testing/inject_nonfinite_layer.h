// A layer for tests of loss scaling: the identity forward, and backward passes dL/dy
// through, except on one local replica at chosen steps, where every element of the gradient
// it passes on becomes +Inf (an overflow in that replica's backward; every element, so that
// an inactive ReLU below cannot stop it). Put it before a Dense
// layer whose kernel gradient should overflow. Counts its own Backward calls per replica
// (one per step without gradient accumulation), from 1.
#ifndef TOWER_TESTS_TESTING_INJECT_NONFINITE_LAYER_H_
#define TOWER_TESTS_TESTING_INJECT_NONFINITE_LAYER_H_

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model/layer.h"
#include "ops/array_ops.h"

namespace tower::testing {

class InjectNonFiniteLayer : public Layer {
 public:
  // Injects on local replica `replica` (−1: never) at each step of `steps` (1-based).
  InjectNonFiniteLayer(int replica, std::set<int> steps)
      : replica_(replica), steps_(std::move(steps)), calls_(64, 0) {}

  std::string Describe() const override { return "InjectNonFinite"; }
  Status Build(int64_t input_dim, int index, VariableFactory& factory) override {
    dim_ = input_dim;
    return OkStatus();
  }
  int64_t output_dim() const override { return dim_; }
  std::vector<Variable*> variables() const override { return {}; }
  StatusOr<Tensor> Forward(int replica, const Tensor& x, LayerCache* cache) override {
    return x;
  }
  StatusOr<Tensor> Backward(int replica, const Tensor& dy, const LayerCache& cache,
                            bool need_input_grad, std::vector<Tensor>* grads) override {
    const int step = ++calls_.at(replica);  // each replica counts its own calls
    if (replica != replica_ || steps_.count(step) == 0 || dy.num_elements() == 0) return dy;
    TOWER_ASSIGN_OR_RETURN(Tensor wide, dy.dtype() == DType::kFloat32
                                            ? StatusOr<Tensor>(dy)
                                            : ops::Cast(dy, DType::kFloat32));
    TOWER_ASSIGN_OR_RETURN(std::vector<float> values, wide.ToHost());
    for (float& value : values) value = INFINITY;
    TOWER_ASSIGN_OR_RETURN(Tensor poisoned, Tensor::FromHost(dy.device(), dy.shape(), values));
    if (dy.dtype() == DType::kFloat32) return poisoned;
    return ops::Cast(poisoned, dy.dtype());
  }

 private:
  const int replica_;
  const std::set<int> steps_;
  std::vector<int> calls_;  // per local replica
  int64_t dim_ = 0;
};

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_INJECT_NONFINITE_LAYER_H_
