// Normalization: y = (x − mean) / std per feature, with the mean and standard deviation of
// the training data (Keras's Normalization layer and its adapt()). Nothing in it is trained;
// the statistics are part of the model: saved and loaded with the weights, applied at
// training, evaluation and prediction alike.
//
// Stored as the affine map it is: "layers.{i}.kernel" = diag(1 / std) [d, d] and
// "layers.{i}.bias" = −mean / std [d], non-trainable (the product by a diagonal matrix costs
// d² per row: nothing beside the dense layers of a tabular model). A constant feature
// (std < 1e-7, as Keras) is only centred.
#ifndef TOWER_MODEL_NORMALIZATION_H_
#define TOWER_MODEL_NORMALIZATION_H_

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "model/layer.h"

namespace tower {

class NormalizationLayer : public Layer {
 public:
  std::string Describe() const override;
  // Starts as the identity (mean 0, std 1) until Adapt or a loaded file sets it.
  Status Build(int64_t input_dim, int index, VariableFactory& factory) override;
  int64_t output_dim() const override { return dim_; }
  std::vector<Variable*> variables() const override { return {}; }  // nothing to train
  StatusOr<Tensor> Forward(int replica, const Tensor& x, LayerCache* cache) override;
  StatusOr<Tensor> Backward(int replica, const Tensor& dy, const LayerCache& cache,
                            bool need_input_grad, std::vector<Tensor>* grads) override;

  // Sets the statistics from every row of `data` (its features:
  // data::ComputeColumnStatistics), on every replica's copies. After Build.
  Status Adapt(const data::Dataset& data);
  // The statistics now in use, from the stored map.
  StatusOr<std::vector<float>> Mean() const;
  StatusOr<std::vector<float>> Std() const;

 private:
  int64_t dim_ = -1;
  Variable* kernel_ = nullptr;  // owned by the model
  Variable* bias_ = nullptr;
};

// A Normalization layer, to put first: Sequential({Normalization(), Dense(1)}).
std::shared_ptr<Layer> Normalization();

}  // namespace tower

#endif  // TOWER_MODEL_NORMALIZATION_H_
