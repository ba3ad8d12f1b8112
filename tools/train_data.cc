#include "tools/train_data.h"

#include <fnmatch.h>

#include <cmath>
#include <utility>

#include "data/csv.h"
#include "data/statistics.h"
#include "data/synthetic.h"
#include "tools/binary_data.h"
#include "util/strings.h"

namespace tower {

StatusOr<Prepared> LoadData(const std::string& spec, const std::string& target, bool class_labels,
                            const std::vector<std::string>& class_names,
                            const std::string& features) {
  if (spec.empty()) {
    return InvalidArgumentError(
        "--data is required: a CSV, .npy, .npz or TFRecord file, "
        "synthetic:linreg or synthetic:mlp");
  }
  if (StartsWith(spec, "synthetic:")) {
    if (!target.empty() || !features.empty()) {
      return InvalidArgumentError(std::string(target.empty() ? "--features" : "--target") +
                                  " applies to CSV data and the binary formats; synthetic data "
                                  "has its own");
    }
    TOWER_ASSIGN_OR_RETURN(data::SyntheticOptions options, data::ParseSyntheticSpec(spec));
    TOWER_ASSIGN_OR_RETURN(data::Dataset dataset, data::Dataset::Synthetic(options));
    return Prepared{std::move(dataset), options.name, "", nullptr};
  }
  if (IsBinaryData(spec)) {
    TOWER_ASSIGN_OR_RETURN(data::Dataset dataset, LoadBinaryData(spec, target, features));
    return Prepared{std::move(dataset), "", features, nullptr};
  }
  if (target.empty()) {
    return InvalidArgumentError("--target is required for CSV data: the column(s) to predict");
  }
  data::CsvOptions csv;
  csv.target_columns = Split(target, ',');
  csv.class_labels = class_labels;
  csv.class_names = class_names;
  if (!features.empty()) csv.feature_columns = Split(features, ',');
  TOWER_ASSIGN_OR_RETURN(data::Dataset dataset, data::Dataset::FromCsv(spec, csv));
  return Prepared{std::move(dataset), "", features, nullptr};
}

bool IsInputError(const Status& status, const InputFiles& files) {
  if (status.code() != StatusCode::kInvalidArgument && status.code() != StatusCode::kDataLoss) {
    return false;
  }
  if (StartsWith(files.data, "synthetic:")) return false;
  // The file an error names comes first, up to ':' ("d.csv: line 12", "d.npz:x: ...").
  const std::string& message = status.message();
  const std::string named = message.substr(0, message.find(':'));
  std::vector<std::string> patterns = Split(files.data, ',');
  if (EndsWith(files.target, ".npy")) patterns.push_back(files.target);
  if (!files.validation.empty()) {
    for (const std::string& file : Split(files.validation, ',')) patterns.push_back(file);
  }
  for (const std::string& pattern : patterns) {
    if (!pattern.empty() && ::fnmatch(pattern.c_str(), named.c_str(), 0) == 0) return true;
  }
  return false;
}

Status CheckClassIds(const data::Dataset& dataset, int64_t classes) {
  if (dataset.stream() != nullptr) return OkStatus();
  TOWER_ASSIGN_OR_RETURN(std::unique_ptr<data::Iterator> rows, dataset.Batch(4096).MakeIterator());
  while (true) {
    TOWER_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, rows->Next());
    if (!batch.has_value()) return OkStatus();
    for (int64_t i = 0; i < batch->rows; ++i) {
      const float label = batch->targets[i];
      if (!(label >= 0 && label < static_cast<float>(classes)) || std::floor(label) != label) {
        return InvalidArgumentError(dataset.DescribeRow(batch->source_rows[i]) + ": target " +
                                    std::to_string(label) + " is not a class id in [0, " +
                                    std::to_string(classes) + ") (the last layer has " +
                                    std::to_string(classes) + " units)");
      }
    }
  }
}

Status PrepareValidation(const ValidationFlags& flags, const Prepared& prepared, int64_t rows,
                         std::optional<int64_t> classes, data::Dataset* training,
                         int64_t* training_rows, std::optional<data::Dataset>* validation) {
  *training = prepared.dataset;
  *training_rows = rows;
  if (flags.split != 0 && !flags.data.empty()) {
    return InvalidArgumentError("give --validation-split or --validation-data, not both");
  }
  if (flags.split != 0) {
    if (!(flags.split > 0 && flags.split < 1)) {
      return InvalidArgumentError("--validation-split=" + std::to_string(flags.split) +
                                  " must be a fraction in (0, 1)");
    }
    if (rows < 0) {
      return InvalidArgumentError("--validation-split needs data with a known number of rows "
                                  "(synthetic:...:rows=N, or a file)");
    }
    const int64_t split_at = static_cast<int64_t>(rows * (1 - flags.split));
    if (split_at < 1 || split_at >= rows) {
      return InvalidArgumentError("--validation-split=" + std::to_string(flags.split) +
                                  " of " + std::to_string(rows) + " rows leaves " +
                                  (split_at < 1 ? "no training rows" : "no validation rows"));
    }
    *training = prepared.dataset.Take(split_at);
    *training_rows = split_at;
    *validation = prepared.dataset.Skip(split_at);
    return OkStatus();
  }
  if (flags.data.empty()) return OkStatus();
  // The training data's class names, in its order: the same ids on both sides.
  const std::vector<std::string>& class_names = prepared.dataset.schema().class_names;
  TOWER_RETURN_IF_ERROR(CheckBinaryValidationData(flags.data));
  StatusOr<Prepared> loaded = LoadData(flags.data, flags.target, classes.has_value(),
                                       class_names, prepared.features);
  if (!loaded.ok()) return loaded.status().WithContext("--validation-data");
  const data::Schema& want = prepared.dataset.schema();
  const data::Schema& got = loaded->dataset.schema();
  if (got.feature_names != want.feature_names || got.target_names != want.target_names) {
    return InvalidArgumentError("--validation-data=" + flags.data + " has columns (" +
                                Join(got.feature_names, ",") + " -> " +
                                Join(got.target_names, ",") + "), the training data (" +
                                Join(want.feature_names, ",") + " -> " +
                                Join(want.target_names, ",") + ")");
  }
  if (loaded->dataset.num_rows() < 0) {
    return InvalidArgumentError("--validation-data=" + flags.data +
                                " is endless: give it rows=N");
  }
  if (classes.has_value()) {
    TOWER_RETURN_IF_ERROR(CheckClassIds(loaded->dataset, *classes).WithContext("--validation-data"));
  }
  *validation = loaded->dataset;
  return OkStatus();
}

StatusOr<std::pair<std::vector<float>, std::vector<float>>> TargetStatistics(
    const data::Dataset& data) {
  TOWER_ASSIGN_OR_RETURN(data::ColumnStatistics stats,
                         data::ComputeColumnStatistics(data, data::Columns::kTargets));
  std::vector<float> mean(stats.mean.begin(), stats.mean.end()), std_dev;
  for (double s : stats.std_dev) std_dev.push_back(s > 1e-7 ? static_cast<float>(s) : 1.0f);
  return std::make_pair(mean, std_dev);
}

}  // namespace tower
