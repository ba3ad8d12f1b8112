// Dense: y = activation(x · kernel + bias), kernel[in, out], bias[out] (Keras's Dense).
#ifndef TOWER_MODEL_DENSE_H_
#define TOWER_MODEL_DENSE_H_

#include <memory>
#include <string>

#include "model/activation.h"
#include "model/layer.h"

namespace tower {

struct DenseOptions {
  std::string activation = "linear";
  bool use_bias = true;
  std::string kernel_initializer = "glorot_uniform";
  std::string bias_initializer = "zeros";
};

class DenseLayer : public Layer {
 public:
  DenseLayer(int64_t units, DenseOptions options) : units_(units), options_(std::move(options)) {}

  std::string Describe() const override;
  Status Build(int64_t input_dim, int index, VariableFactory& factory) override;
  int64_t output_dim() const override { return units_; }
  std::vector<Variable*> variables() const override;
  StatusOr<Tensor> Forward(int replica, const Tensor& x, LayerCache* cache) override;
  StatusOr<Tensor> Backward(int replica, const Tensor& dy, const LayerCache& cache,
                            bool need_input_grad, std::vector<Tensor>* grads) override;
  // The kernel's gradient added into its sum by the product itself (ops::MatMulAddInto), in
  // float32; the bias's appended new.
  StatusOr<Tensor> BackwardAddingInto(int replica, const Tensor& dy, const LayerCache& cache,
                                      bool need_input_grad, Span<Tensor* const> sums,
                                      std::vector<Tensor>* grads) override;

  Variable* kernel() const { return kernel_; }
  Variable* bias() const { return bias_; }
  // A 16-bit type: the input, kernel and activations in it, products accumulated in float32
  // and the variables' gradients in float32. A softmax layer stays float32.
  void set_compute_dtype(DType dtype) override { compute_dtype_ = dtype; }
  void set_weights_version(uint64_t version) override { weights_version_ = version; }
  DType compute_dtype() const {
    return activation_ == Activation::kSoftmax ? DType::kFloat32 : compute_dtype_;
  }

 private:
  const int64_t units_;
  const DenseOptions options_;
  Activation activation_ = Activation::kLinear;
  Variable* kernel_ = nullptr;  // owned by the model
  Variable* bias_ = nullptr;
  DType compute_dtype_ = DType::kFloat32;
  uint64_t weights_version_ = 0;  // set_weights_version
};

// Keras-style constructors: Dense(1), Dense(64, "relu").
std::shared_ptr<Layer> Dense(int64_t units, std::string activation = "linear");
std::shared_ptr<Layer> Dense(int64_t units, DenseOptions options);

}  // namespace tower

#endif  // TOWER_MODEL_DENSE_H_
