// Manual towers, as in TensorFlow 1's cifar10_multi_gpu_train: the variables live
// on one device (the CPU), each tower computes the loss and gradients of its part of the
// batch on its own device, the tower gradients are averaged on one device, and the update
// is applied once.
//
//   auto shards = tower::SplitBatch(batch, devices.size());
//   std::vector<tower::TowerGradients> towers;
//   for (size_t i = 0; i < devices.size(); ++i)
//     towers.push_back(*tower::ComputeTowerGradients(model, shards[i], devices[i]));
//   auto grads = tower::AverageGradients(towers, cpu);
//   model.ApplyGradients(*grads);
//
// The weights are copied to each tower's device by the ops themselves (they run where the
// tower's DeviceScope says, and inputs elsewhere are copied there).
#ifndef TOWER_MODEL_TOWERS_H_
#define TOWER_MODEL_TOWERS_H_

#include <vector>

#include "data/batch.h"
#include "model/sequential.h"

namespace tower {

struct TowerGradients {
  Device* device = nullptr;
  double loss = 0;           // the tower's mean loss over its rows
  std::vector<Tensor> grads;  // in trainable_variables() order, on `device`
};

// `parts` contiguous shards of a batch, in order: the shard layout of a distribution
// (ReplicaRows, strategy/step/distribution.h).
std::vector<data::Batch> SplitBatch(const data::Batch& batch, int parts);

// The loss (mean over the shard) and its gradients for a model built with one replica,
// computed on `device`. A shard of zero rows is InvalidArgument (a tower needs data).
StatusOr<TowerGradients> ComputeTowerGradients(Sequential& model, const data::Batch& shard,
                                               Device* device);

// TensorFlow 1's average_gradients: the mean over towers of each gradient, on `device`.
StatusOr<std::vector<Tensor>> AverageGradients(const std::vector<TowerGradients>& towers,
                                               Device* device);

}  // namespace tower

#endif  // TOWER_MODEL_TOWERS_H_
