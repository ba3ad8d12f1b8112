#include "model/model_file.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "model/activation.h"
#include "model/checkpoint/safetensors.h"
#include "model/dense.h"
#include "model/normalization.h"
#include "util/strings.h"

namespace tower {
namespace {

constexpr char kFormat[] = "tower.format";
constexpr char kLayers[] = "tower.layers";
constexpr char kLoss[] = "tower.loss";
constexpr char kFeatures[] = "tower.features";
constexpr char kTargets[] = "tower.targets";
constexpr char kClasses[] = "tower.classes";
constexpr char kTargetMean[] = "tower.target_mean";
constexpr char kTargetStd[] = "tower.target_std";

// Floats one per line, each written so that it reads back to the same bits.
std::string FloatsText(const std::vector<float>& values) {
  std::vector<std::string> lines;
  for (float value : values) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.9g", value);
    lines.push_back(text);
  }
  return Join(lines, "\n");
}

StatusOr<std::vector<float>> ParseFloats(const std::string& text, const std::string& where) {
  std::vector<float> values;
  for (const std::string& line : Split(text, '\n')) {
    char* end = nullptr;
    const float value = std::strtof(line.c_str(), &end);
    if (line.empty() || *end != '\0' || !std::isfinite(value)) {
      return InvalidArgumentError(where + ": '" + line + "' is not a finite number");
    }
    values.push_back(value);
  }
  return values;
}

}  // namespace

StatusOr<std::vector<std::shared_ptr<Layer>>> LayersFromSpec(const std::string& spec) {
  if (spec.empty()) return InvalidArgumentError("no layers given, e.g. 64:relu,1");
  std::vector<std::shared_ptr<Layer>> layers;
  for (const std::string& part : Split(spec, ',')) {
    if (part == "normalize") {
      if (!layers.empty()) {
        return InvalidArgumentError("'" + spec + "': normalize must come first (it scales the "
                                    "input features)");
      }
      layers.push_back(Normalization());
      continue;
    }
    const std::vector<std::string> fields = Split(part, ':');
    std::optional<int64_t> units = ParseInt64(fields[0]);
    if (fields.size() > 2 || !units || *units <= 0 || *units > (1 << 20)) {
      return InvalidArgumentError("'" + spec + "': '" + part +
                                  "' is not UNITS[:ACTIVATION], e.g. 64:relu");
    }
    const std::string activation = fields.size() == 2 ? fields[1] : "linear";
    TOWER_RETURN_IF_ERROR(ParseActivation(activation).status().WithContext("'" + spec + "'"));
    layers.push_back(Dense(*units, activation));  // Keras's defaults: glorot_uniform, zeros
  }
  return layers;
}

std::map<std::string, std::string> ToMetadata(const ModelDescription& description) {
  // Names one per line: column and class names may hold commas.
  std::map<std::string, std::string> metadata = {
      {kFormat, std::to_string(kModelFormatVersion)},
      {kLayers, description.layers},
      {kLoss, description.loss},
      {kFeatures, Join(description.feature_names, "\n")},
      {kTargets, Join(description.target_names, "\n")}};
  if (!description.class_names.empty()) {
    metadata[kClasses] = Join(description.class_names, "\n");
  }
  if (!description.target_mean.empty()) {
    metadata[kTargetMean] = FloatsText(description.target_mean);
    metadata[kTargetStd] = FloatsText(description.target_std);
  }
  return metadata;
}

StatusOr<ModelDescription> ModelDescriptionFromMetadata(
    const std::map<std::string, std::string>& metadata, const std::string& path) {
  auto format = metadata.find(kFormat);
  if (format == metadata.end()) {
    return InvalidArgumentError(path + " holds weights without a model description (no '" +
                                kFormat + "' in its metadata): save it with `tower train "
                                "--save` (or Sequential::set_description) to evaluate or "
                                "predict with it");
  }
  std::optional<int64_t> version = ParseInt64(format->second);
  if (!version || *version < 1) {
    return InvalidArgumentError(path + ": '" + kFormat + "' is '" + format->second +
                                "', not a format version");
  }
  if (*version > kModelFormatVersion) {
    return InvalidArgumentError(path + " was written in model format " + format->second +
                                ", newer than this Tower reads (" +
                                std::to_string(kModelFormatVersion) + "): use a newer Tower");
  }
  ModelDescription description;
  for (const auto& [key, field] :
       {std::pair<const char*, std::string*>{kLayers, &description.layers}, {kLoss, &description.loss}}) {
    auto it = metadata.find(key);
    if (it == metadata.end() || it->second.empty()) {
      return InvalidArgumentError(path + ": the model description has no '" + key + "'");
    }
    *field = it->second;
  }
  for (const auto& [key, names] : {std::pair<const char*, std::vector<std::string>*>{
                                       kFeatures, &description.feature_names},
                                   {kTargets, &description.target_names}}) {
    auto it = metadata.find(key);
    if (it == metadata.end() || it->second.empty()) {
      return InvalidArgumentError(path + ": the model description has no '" + key + "'");
    }
    *names = Split(it->second, '\n');
  }
  if (auto it = metadata.find(kClasses); it != metadata.end() && !it->second.empty()) {
    description.class_names = Split(it->second, '\n');
  }
  auto mean = metadata.find(kTargetMean);
  auto std_dev = metadata.find(kTargetStd);
  if ((mean == metadata.end()) != (std_dev == metadata.end())) {
    return InvalidArgumentError(path + ": the model description has only one of '" +
                                kTargetMean + "' and '" + kTargetStd + "'");
  }
  if (mean != metadata.end()) {
    TOWER_ASSIGN_OR_RETURN(description.target_mean,
                           ParseFloats(mean->second, path + ": " + kTargetMean));
    TOWER_ASSIGN_OR_RETURN(description.target_std,
                           ParseFloats(std_dev->second, path + ": " + kTargetStd));
    if (description.target_mean.size() != description.target_names.size() ||
        description.target_std.size() != description.target_names.size()) {
      return InvalidArgumentError(path + ": the target statistics do not match the " +
                                  std::to_string(description.target_names.size()) + " targets");
    }
  }
  TOWER_RETURN_IF_ERROR(LayersFromSpec(description.layers).status().WithContext(path));
  return description;
}

StatusOr<ModelDescription> ReadModelDescription(const std::string& path) {
  TOWER_ASSIGN_OR_RETURN(checkpoint::File file, checkpoint::Load(path));
  return ModelDescriptionFromMetadata(file.metadata, path);
}

}  // namespace tower
