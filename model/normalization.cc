#include "model/normalization.h"

#include <cmath>

#include "data/statistics.h"
#include "ops/math_ops.h"

namespace tower {
namespace {

constexpr double kMinStd = 1e-7;

// diag(1 / std) [d, d] row-major, and −mean / std.
void AffineOf(const std::vector<double>& mean, const std::vector<double>& std_dev,
              std::vector<float>* kernel, std::vector<float>* bias) {
  const size_t d = mean.size();
  kernel->assign(d * d, 0.0f);
  bias->assign(d, 0.0f);
  for (size_t j = 0; j < d; ++j) {
    const double scale = std_dev[j] < kMinStd ? 1.0 : 1.0 / std_dev[j];
    (*kernel)[j * d + j] = static_cast<float>(scale);
    (*bias)[j] = static_cast<float>(-mean[j] * scale);
  }
}

}  // namespace

std::string NormalizationLayer::Describe() const {
  return "Normalization(" + (dim_ < 0 ? std::string("unbuilt") : std::to_string(dim_)) + ")";
}

Status NormalizationLayer::Build(int64_t input_dim, int index, VariableFactory& factory) {
  const std::string prefix = "layers." + std::to_string(index);
  if (input_dim <= 0) {
    return InvalidArgumentError(prefix + " (Normalization): needs inputs with at least one "
                                "feature, got " + std::to_string(input_dim));
  }
  dim_ = input_dim;
  Initializer zeros;
  zeros.kind = Initializer::Kind::kZeros;
  TOWER_ASSIGN_OR_RETURN(kernel_, factory.Create(prefix + ".kernel", Shape{dim_, dim_}, zeros,
                                                 /*trainable=*/false));
  TOWER_ASSIGN_OR_RETURN(bias_, factory.Create(prefix + ".bias", Shape{dim_}, zeros,
                                               /*trainable=*/false));
  std::vector<float> kernel, bias;
  AffineOf(std::vector<double>(dim_, 0.0), std::vector<double>(dim_, 1.0), &kernel, &bias);
  TOWER_RETURN_IF_ERROR(kernel_->Assign(kernel));
  return bias_->Assign(bias);
}

StatusOr<Tensor> NormalizationLayer::Forward(int replica, const Tensor& x, LayerCache* cache) {
  if (kernel_ == nullptr) return FailedPreconditionError("Normalization used before Build");
  TOWER_ASSIGN_OR_RETURN(Tensor z, ops::MatMul(x, kernel_->value(replica)));
  TOWER_ASSIGN_OR_RETURN(Tensor y, ops::BiasAdd(z, bias_->value(replica)));
  if (cache != nullptr) {
    cache->input = x;
    cache->output = y;
  }
  return y;
}

StatusOr<Tensor> NormalizationLayer::Backward(int replica, const Tensor& dy, const LayerCache&,
                                              bool need_input_grad, std::vector<Tensor>*) {
  if (!need_input_grad) return Tensor();  // first layer: nothing to pass back, nothing to train
  return ops::MatMul(dy, kernel_->value(replica), false, /*transpose_b=*/true);
}

Status NormalizationLayer::Adapt(const data::Dataset& data) {
  if (kernel_ == nullptr) return FailedPreconditionError("Normalization::Adapt before Build");
  if (data.feature_dim() != dim_) {
    return InvalidArgumentError("Normalization::Adapt: the data has " +
                                std::to_string(data.feature_dim()) + " features, the layer " +
                                std::to_string(dim_));
  }
  StatusOr<data::ColumnStatistics> stats =
      data::ComputeColumnStatistics(data, data::Columns::kFeatures);
  if (!stats.ok()) return stats.status().WithContext("Normalization::Adapt");
  std::vector<float> kernel, bias;
  AffineOf(stats->mean, stats->std_dev, &kernel, &bias);
  TOWER_RETURN_IF_ERROR(kernel_->Assign(kernel));
  return bias_->Assign(bias);
}

StatusOr<std::vector<float>> NormalizationLayer::Std() const {
  TOWER_ASSIGN_OR_RETURN(std::vector<float> kernel, kernel_->Read());
  std::vector<float> out(dim_);
  for (int64_t j = 0; j < dim_; ++j) out[j] = 1.0f / kernel[j * dim_ + j];
  return out;
}

StatusOr<std::vector<float>> NormalizationLayer::Mean() const {
  TOWER_ASSIGN_OR_RETURN(std::vector<float> kernel, kernel_->Read());
  TOWER_ASSIGN_OR_RETURN(std::vector<float> bias, bias_->Read());
  std::vector<float> out(dim_);
  for (int64_t j = 0; j < dim_; ++j) out[j] = -bias[j] / kernel[j * dim_ + j];
  return out;
}

std::shared_ptr<Layer> Normalization() { return std::make_shared<NormalizationLayer>(); }

}  // namespace tower
