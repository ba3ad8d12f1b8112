// A model file that is the model: the safetensors file SaveWeights writes also carries, in
// its metadata, what it takes to rebuild the model (the layers, the loss, the columns it
// reads and predicts), so that evaluating or predicting with it needs nothing else.
//
//   "tower.format": "1"                  the version of this description
//   "tower.layers": "64:relu,1"          LayersFromSpec
//   "tower.loss":   "mean_squared_error" LossFromName
//   "tower.features": "x1\nx2"  "tower.targets": "y"  column names, in order, one per line
//   "tower.classes": "setosa\nversicolor"               a classifier's class names, if any
//   "tower.target_mean", "tower.target_std": "22.53\n..."  normalized targets (regression), if any
//
// A file from a newer format, or without a description (weights only), is refused by
// ModelDescriptionFromMetadata with a message that says which.
#ifndef TOWER_MODEL_MODEL_FILE_H_
#define TOWER_MODEL_MODEL_FILE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/layer.h"
#include "util/statusor.h"

namespace tower {

// The format this version writes and the newest it reads.
constexpr int kModelFormatVersion = 1;

struct ModelDescription {
  std::string layers;  // "[normalize,]UNITS[:ACTIVATION],...", e.g. "normalize,64:relu,1"
  std::string loss;    // a name LossFromName takes
  std::vector<std::string> feature_names;
  std::vector<std::string> target_names;
  // A classifier trained on text labels: class id i is class_names[i]. Empty otherwise.
  std::vector<std::string> class_names;
  // Regression trained on normalized targets (Sequential::SetTargetNormalization): per
  // target column. Empty otherwise.
  std::vector<float> target_mean;
  std::vector<float> target_std;
};

// Layers from "UNITS[:ACTIVATION],..." ("64:relu,1"; no activation: linear): Dense layers,
// after an optional leading "normalize" (a Normalization layer, model/normalization.h).
StatusOr<std::vector<std::shared_ptr<Layer>>> LayersFromSpec(const std::string& spec);

std::map<std::string, std::string> ToMetadata(const ModelDescription& description);
// `path` names the file in errors.
StatusOr<ModelDescription> ModelDescriptionFromMetadata(
    const std::map<std::string, std::string>& metadata, const std::string& path);
// Reads just the description of the model file at `path`.
StatusOr<ModelDescription> ReadModelDescription(const std::string& path);

}  // namespace tower

#endif  // TOWER_MODEL_MODEL_FILE_H_
