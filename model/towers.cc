#include "model/towers.h"

#include "device/placement.h"
#include "ops/math_ops.h"

namespace tower {

std::vector<data::Batch> SplitBatch(const data::Batch& batch, int parts) {
  std::vector<data::Batch> shards;
  for (int part = 0; part < parts; ++part) {
    const RowRange range = ReplicaRows(batch.rows, parts, part);
    const int64_t first = range.first;
    const int64_t rows = range.count;
    data::Batch shard;
    shard.rows = rows;
    shard.feature_dim = batch.feature_dim;
    shard.target_dim = batch.target_dim;
    shard.features.assign(batch.features.begin() + first * batch.feature_dim,
                          batch.features.begin() + (first + rows) * batch.feature_dim);
    shard.targets.assign(batch.targets.begin() + first * batch.target_dim,
                         batch.targets.begin() + (first + rows) * batch.target_dim);
    if (!batch.source_rows.empty()) {
      shard.source_rows.assign(batch.source_rows.begin() + first,
                               batch.source_rows.begin() + first + rows);
    }
    shards.push_back(std::move(shard));
  }
  return shards;
}

StatusOr<TowerGradients> ComputeTowerGradients(Sequential& model, const data::Batch& shard,
                                               Device* device) {
  if (model.loss() == nullptr || !model.built()) {
    return FailedPreconditionError("towers need a compiled, built model");
  }
  if (shard.rows == 0) return InvalidArgumentError("a tower got an empty shard");
  // with tf.device(tower device): everything of this tower runs there.
  DeviceScope scope(device->full_name());
  TowerGradients tower;
  tower.device = device;
  TOWER_ASSIGN_OR_RETURN(Tensor x, Tensor::FromHostBytes(device, Shape{shard.rows, shard.feature_dim},
                                                          DType::kFloat32, shard.features.data()));
  TOWER_ASSIGN_OR_RETURN(Tensor targets,
                         model.loss()->PrepareTargets(device, shard.targets.data(), shard.rows,
                                                      shard.target_dim, model.output_dim(),
                                                      shard.source_rows.empty()
                                                          ? nullptr
                                                          : shard.source_rows.data()));
  PassOptions options;
  options.targets = &targets;
  options.loss_rows = shard.rows;
  options.backward = true;
  ReplicaPass pass;
  TOWER_RETURN_IF_ERROR(model.ForwardBackward(/*replica=*/0, x, options, &pass));
  TOWER_ASSIGN_OR_RETURN(std::vector<float> loss_value, pass.loss.ToHost());
  tower.loss = loss_value[0];
  tower.grads = std::move(pass.gradients);
  return tower;
}

StatusOr<std::vector<Tensor>> AverageGradients(const std::vector<TowerGradients>& towers,
                                               Device* device) {
  if (towers.empty()) return InvalidArgumentError("AverageGradients: no towers");
  DeviceScope scope(device->full_name());
  std::vector<Tensor> averaged;
  for (size_t v = 0; v < towers[0].grads.size(); ++v) {
    std::vector<Tensor> terms;
    for (const TowerGradients& tower : towers) {
      if (tower.grads.size() != towers[0].grads.size()) {
        return InvalidArgumentError("AverageGradients: towers have different gradient counts");
      }
      terms.push_back(tower.grads[v]);
    }
    TOWER_ASSIGN_OR_RETURN(Tensor sum, ops::AddN(terms));  // copies each term to `device`
    TOWER_ASSIGN_OR_RETURN(Tensor mean, ops::Scale(sum, 1.0f / static_cast<float>(towers.size())));
    averaged.push_back(std::move(mean));
  }
  return averaged;
}

}  // namespace tower
