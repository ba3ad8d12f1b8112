#include "model/loss.h"

#include <cmath>
#include <vector>

#include "ops/nn_ops.h"

namespace tower {
namespace {

class MeanSquaredError : public Loss {
 public:
  std::string name() const override { return "mean_squared_error"; }
  Status CheckShapes(int64_t output_dim, int64_t target_dim) const override {
    if (output_dim == target_dim) return OkStatus();
    return InvalidArgumentError("mean_squared_error: the model has " +
                                std::to_string(output_dim) + " outputs but the data has " +
                                std::to_string(target_dim) + " targets per row");
  }
  StatusOr<Tensor> PrepareTargets(Device* device, const float* targets, int64_t rows,
                                  int64_t target_dim, int64_t, const int64_t*) const override {
    return Tensor::FromHostBytes(device, Shape{rows, target_dim}, DType::kFloat32, targets);
  }
  StatusOr<Tensor> Value(const Tensor& pred, const Tensor& targets,
                         int64_t global_batch) const override {
    return ops::MeanSquaredError(pred, targets, global_batch);
  }
  StatusOr<Tensor> Gradient(const Tensor& pred, const Tensor& targets,
                            int64_t global_batch) const override {
    return ops::MeanSquaredErrorGrad(pred, targets, global_batch);
  }
};

class SparseCategoricalCrossentropy : public Loss {
 public:
  std::string name() const override { return "sparse_categorical_crossentropy"; }
  Status CheckShapes(int64_t output_dim, int64_t target_dim) const override {
    if (target_dim != 1) {
      return InvalidArgumentError("sparse_categorical_crossentropy needs one target column "
                                  "(the class id), the data has " +
                                  std::to_string(target_dim));
    }
    if (output_dim < 2) {
      return InvalidArgumentError("sparse_categorical_crossentropy needs a model with one "
                                  "output (logit) per class, at least 2; it has " +
                                  std::to_string(output_dim));
    }
    return OkStatus();
  }
  StatusOr<Tensor> PrepareTargets(Device* device, const float* targets, int64_t rows,
                                  int64_t, int64_t output_dim,
                                  const int64_t* source_rows) const override {
    std::vector<int32_t> labels(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) {
      const float value = targets[i];
      if (!(value >= 0 && value < static_cast<float>(output_dim)) || std::floor(value) != value) {
        const int64_t row = source_rows != nullptr ? source_rows[i] : i;
        return InvalidArgumentError("row " + std::to_string(row) + ": target " +
                                    std::to_string(value) + " is not a class id in [0, " +
                                    std::to_string(output_dim) + ")");
      }
      labels[i] = static_cast<int32_t>(value);
    }
    return Tensor::FromHostInt32(device, Shape{rows}, labels);
  }
  StatusOr<Tensor> Value(const Tensor& pred, const Tensor& targets,
                         int64_t global_batch) const override {
    // PrepareTargets checked every label on the host.
    return ops::SparseSoftmaxCrossEntropy(pred, targets, global_batch, /*labels_checked=*/true);
  }
  StatusOr<Tensor> Gradient(const Tensor& pred, const Tensor& targets,
                            int64_t global_batch) const override {
    return ops::SparseSoftmaxCrossEntropyGrad(pred, targets, global_batch,
                                              /*labels_checked=*/true);
  }
};

}  // namespace

std::unique_ptr<Loss> MeanSquaredErrorLoss() { return std::make_unique<MeanSquaredError>(); }

std::unique_ptr<Loss> SparseCategoricalCrossentropyLoss() {
  return std::make_unique<SparseCategoricalCrossentropy>();
}

StatusOr<std::unique_ptr<Loss>> LossFromName(std::string_view name) {
  if (name == "mse" || name == "mean_squared_error") return MeanSquaredErrorLoss();
  if (name == "sparse_categorical_crossentropy" || name == "sparse_ce") {
    return SparseCategoricalCrossentropyLoss();
  }
  return InvalidArgumentError("unknown loss '" + std::string(name) +
                              "'; use mse or sparse_categorical_crossentropy");
}

}  // namespace tower
