#include "model/dense.h"

#include "ops/array_ops.h"
#include "ops/math_ops.h"

namespace tower {

std::shared_ptr<Layer> Dense(int64_t units, std::string activation) {
  DenseOptions options;
  options.activation = std::move(activation);
  return std::make_shared<DenseLayer>(units, std::move(options));
}

std::shared_ptr<Layer> Dense(int64_t units, DenseOptions options) {
  return std::make_shared<DenseLayer>(units, std::move(options));
}

std::string DenseLayer::Describe() const {
  std::string text = "Dense(" + std::to_string(units_);
  if (!options_.activation.empty() && options_.activation != "linear") {
    text += ", " + options_.activation;
  }
  if (!options_.use_bias) text += ", no bias";
  return text + ")";
}

Status DenseLayer::Build(int64_t input_dim, int index, VariableFactory& factory) {
  const std::string prefix = "layers." + std::to_string(index);
  const std::string where = prefix + " (" + Describe() + ")";
  if (units_ <= 0) {
    return InvalidArgumentError(where + ": units must be positive, got " +
                                std::to_string(units_));
  }
  if (input_dim <= 0) {
    return InvalidArgumentError(where + ": needs inputs with at least one feature, got " +
                                std::to_string(input_dim));
  }
  StatusOr<Activation> activation = ParseActivation(options_.activation);
  if (!activation.ok()) return activation.status().WithContext(where);
  activation_ = *activation;
  StatusOr<Initializer> kernel_init = ParseInitializer(options_.kernel_initializer);
  if (!kernel_init.ok()) return kernel_init.status().WithContext(where + " kernel");
  StatusOr<Initializer> bias_init = ParseInitializer(options_.bias_initializer);
  if (!bias_init.ok()) return bias_init.status().WithContext(where + " bias");
  TOWER_ASSIGN_OR_RETURN(kernel_, factory.Create(prefix + ".kernel", Shape{input_dim, units_},
                                                 *kernel_init, true));
  if (options_.use_bias) {
    TOWER_ASSIGN_OR_RETURN(bias_, factory.Create(prefix + ".bias", Shape{units_}, *bias_init,
                                                 true));
  }
  return OkStatus();
}

std::vector<Variable*> DenseLayer::variables() const {
  std::vector<Variable*> out;
  if (kernel_ != nullptr) out.push_back(kernel_);
  if (bias_ != nullptr) out.push_back(bias_);
  return out;
}

namespace {

// `t` in `dtype` (itself when it is already).
StatusOr<Tensor> InDType(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  return ops::Cast(t, dtype);
}

}  // namespace

StatusOr<Tensor> DenseLayer::Forward(int replica, const Tensor& x, LayerCache* cache) {
  TOWER_CHECK(kernel_ != nullptr) << "Dense layer used before Build";
  // In the compute dtype: the input as it comes (a previous layer's 16-bit activations, or
  // float32 features cast here), and the float32 kernel cast for this step (Keras's
  // AutoCastVariable). The bias is added in float32 and rounded once.
  const DType compute = compute_dtype();
  TOWER_ASSIGN_OR_RETURN(Tensor input, InDType(x, compute));
  TOWER_ASSIGN_OR_RETURN(Tensor kernel, InDType(kernel_->value(replica), compute));
  // A float32 kernel is the variable's own buffer, constant for the step's version; a cast
  // one is this pass's own copy.
  const uint64_t version = compute == DType::kFloat32 ? weights_version_ : 0;
  Tensor z;
  Activation remaining = activation_;
  if (compute == DType::kFloat32) {
    // One op: the product, the bias and a Relu, the bits of the three (ops::FusedMatMul).
    // Other activations follow it.
    const bool relu = activation_ == Activation::kRelu;
    if (relu) remaining = Activation::kLinear;
    TOWER_ASSIGN_OR_RETURN(
        z, ops::FusedMatMul(input, kernel, bias_ != nullptr ? bias_->value(replica) : Tensor(),
                            relu ? ops::FusedActivation::kRelu : ops::FusedActivation::kNone,
                            /*transpose_weight=*/false, version));
  } else {
    TOWER_ASSIGN_OR_RETURN(z, ops::MatMulByWeight(input, kernel, false, version));
    if (bias_ != nullptr) {
      TOWER_ASSIGN_OR_RETURN(z, ops::BiasAdd(z, bias_->value(replica)));
    }
  }
  TOWER_ASSIGN_OR_RETURN(Tensor y, ApplyActivation(remaining, z));
  if (cache != nullptr) {
    cache->input = input;
    cache->output = y;
    if (compute != DType::kFloat32) cache->kernel = kernel;
  }
  return y;
}

StatusOr<Tensor> DenseLayer::Backward(int replica, const Tensor& dy, const LayerCache& cache,
                                      bool need_input_grad, std::vector<Tensor>* grads) {
  return BackwardAddingInto(replica, dy, cache, need_input_grad, {}, grads);
}

StatusOr<Tensor> DenseLayer::BackwardAddingInto(int replica, const Tensor& dy,
                                                const LayerCache& cache, bool need_input_grad,
                                                Span<Tensor* const> sums,
                                                std::vector<Tensor>* grads) {
  // dz = f'(z) ⊙ dy; dkernel = xᵀ·dz [in, out]; dbias = Σ_batch dz [out]; dx = dz·kernelᵀ.
  // A 16-bit layer: dz in the compute dtype, the variables' gradients accumulated into
  // float32 (their dtype), dx in the compute dtype.
  const DType compute = compute_dtype();
  TOWER_ASSIGN_OR_RETURN(Tensor d, InDType(dy, compute));
  TOWER_ASSIGN_OR_RETURN(Tensor dz, ActivationGrad(activation_, d, cache.output));
  if (!sums.empty() && sums[0] != nullptr && compute == DType::kFloat32) {
    // sums[0] += xᵀ·dz: the running sum of the kernel's gradient, which stays that tensor.
    TOWER_RETURN_IF_ERROR(ops::MatMulAddInto(cache.input, dz, /*transpose_a=*/true,
                                             /*transpose_b=*/false, *sums[0]));
    grads->push_back(*sums[0]);
  } else {
    TOWER_ASSIGN_OR_RETURN(Tensor dkernel, ops::MatMul(cache.input, dz, /*transpose_a=*/true,
                                                       /*transpose_b=*/false, DType::kFloat32));
    grads->push_back(std::move(dkernel));
  }
  if (bias_ != nullptr) {
    TOWER_ASSIGN_OR_RETURN(Tensor dbias, ops::ReduceSum(dz, ops::ReduceAxis::kBatch));
    grads->push_back(std::move(dbias));
  }
  if (!need_input_grad) return Tensor();
  if (compute != DType::kFloat32) return ops::MatMul(dz, cache.kernel, false, /*transpose_b=*/true);
  return ops::MatMulByWeight(dz, kernel_->value(replica), /*transpose_weight=*/true,
                             weights_version_);
}

}  // namespace tower
