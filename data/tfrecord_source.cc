#include "data/tfrecord_source.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "util/strings.h"

namespace tower::data {
namespace {

// Names come from the file: control bytes escaped, so that a message stays one line.
std::string Quoted(std::string_view name) { return "'" + Printable(name) + "'"; }

}  // namespace

StatusOr<std::shared_ptr<const TfRecordSource>> TfRecordSource::Open(
    const std::vector<std::string>& paths, const TfRecordOptions& options) {
  if (paths.empty()) return InvalidArgumentError("TFRecord: no files given");
  if (options.target_features.empty()) {
    return InvalidArgumentError("TFRecord: name the target feature(s) (--target=NAME)");
  }
  std::shared_ptr<TfRecordSource> source(new TfRecordSource());
  Scratch scratch;
  for (const std::string& path : paths) {
    auto check = [&](int64_t record, std::string_view example) -> Status {
      if (source->columns_.empty()) TOWER_RETURN_IF_ERROR(source->SetColumns(example, options));
      return source->DecodeRow(example, nullptr, nullptr, &scratch);
    };
    TOWER_ASSIGN_OR_RETURN(std::unique_ptr<TfRecordReader> file, TfRecordReader::Open(path, check));
    source->first_row_.push_back(source->first_row_.back() + file->num_records());
    source->files_.push_back(std::move(file));
  }
  return std::shared_ptr<const TfRecordSource>(std::move(source));
}

Status TfRecordSource::SetColumns(std::string_view example, const TfRecordOptions& options) {
  // Every feature of the first record, by name (a later duplicate replaces the earlier).
  std::map<std::string, FeatureList> first;
  TOWER_RETURN_IF_ERROR(
      ForEachFeature(example, [&](std::string_view name, std::string_view feature) {
        return DecodeFeature(feature, &first[std::string(name)]);
      }));
  std::vector<std::string> inputs = options.features;
  const std::set<std::string> targets(options.target_features.begin(),
                                      options.target_features.end());
  if (inputs.empty()) {
    for (const auto& [name, list] : first) {
      const bool numeric = list.kind == FeatureKind::kFloat || list.kind == FeatureKind::kInt64;
      if (numeric && targets.count(name) == 0) inputs.push_back(name);
    }
    if (inputs.empty()) {
      return InvalidArgumentError(
          "the first record has no float_list or int64_list feature "
          "besides the target(s): nothing to train on");
    }
  }
  std::vector<std::string> known;
  for (const auto& entry : first) known.push_back(entry.first);
  auto add = [&](const std::string& name, bool target) -> Status {
    const auto it = first.find(name);
    if (it == first.end()) {
      std::string names;
      for (const std::string& k : known) names += (names.empty() ? "" : ", ") + Printable(k);
      return InvalidArgumentError("the first record has no feature " + Quoted(name) +
                                  " (its features: " + names + ")");
    }
    const FeatureList& list = it->second;
    if (list.kind != FeatureKind::kFloat && list.kind != FeatureKind::kInt64) {
      return InvalidArgumentError("feature " + Quoted(name) + " is a " +
                                  FeatureKindName(list.kind) +
                                  ": only float_list and int64_list features can be read");
    }
    if (list.size() == 0) {
      return InvalidArgumentError("feature " + Quoted(name) + " has no values in the first record");
    }
    if (column_of_.count(name) != 0) {
      return InvalidArgumentError("feature " + Quoted(name) + " is named twice");
    }
    Column column{name, list.kind, list.size(), target, target ? target_dim_ : feature_dim_};
    std::vector<std::string>& names = target ? schema_.target_names : schema_.feature_names;
    for (int64_t i = 0; i < column.length; ++i) {
      names.push_back(column.length == 1 ? name : name + "[" + std::to_string(i) + "]");
    }
    (target ? target_dim_ : feature_dim_) += column.length;
    columns_.push_back(std::move(column));
    column_of_[columns_.back().name] = columns_.size() - 1;
    return OkStatus();
  };
  // columns_ must not reallocate once column_of_ holds views of its names.
  columns_.reserve(inputs.size() + options.target_features.size());
  for (const std::string& name : inputs) TOWER_RETURN_IF_ERROR(add(name, false));
  for (const std::string& name : options.target_features) TOWER_RETURN_IF_ERROR(add(name, true));
  return OkStatus();
}

Status TfRecordSource::DecodeRow(std::string_view example, float* features, float* targets,
                                 Scratch* scratch) const {
  scratch->seen.assign(columns_.size(), 0);
  TOWER_RETURN_IF_ERROR(
      ForEachFeature(example, [&](std::string_view name, std::string_view feature) -> Status {
        const auto it = column_of_.find(name);
        if (it == column_of_.end()) return OkStatus();
        const Column& column = columns_[it->second];
        FeatureList& list = scratch->list;
        TOWER_RETURN_IF_ERROR(DecodeFeature(feature, &list));
        if (list.kind != column.kind || list.size() != column.length) {
          return InvalidArgumentError(
              "feature " + Quoted(name) + " is a " + FeatureKindName(list.kind) + " of " +
              std::to_string(list.size()) + " value(s), the first record's a " +
              FeatureKindName(column.kind) + " of " + std::to_string(column.length) +
              " (every record needs the same features, of the same kind and length)");
        }
        scratch->seen[it->second] = 1;
        float* out = column.target ? targets : features;
        if (out == nullptr) return OkStatus();
        out += column.offset;
        if (column.kind == FeatureKind::kFloat) {
          std::copy(list.floats.begin(), list.floats.end(), out);
        } else {
          for (int64_t i = 0; i < column.length; ++i) out[i] = static_cast<float>(list.int64s[i]);
        }
        return OkStatus();
      }));
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (!scratch->seen[c]) {
      return InvalidArgumentError("feature " + Quoted(columns_[c].name) +
                                  " is missing (the first record has it; every record needs "
                                  "the features read)");
    }
  }
  return OkStatus();
}

Status TfRecordSource::Read(const int64_t* rows, int64_t n, float* features, float* targets) const {
  Scratch scratch;
  std::vector<std::string_view> examples;
  int64_t i = 0;
  while (i < n) {
    const int64_t first = rows[i];
    const size_t file = static_cast<size_t>(
        std::upper_bound(first_row_.begin(), first_row_.end(), first) - first_row_.begin() - 1);
    // The run rows[i..j) of consecutive rows in one file: one read.
    int64_t j = i + 1;
    while (j < n && rows[j] == first + (j - i) && rows[j] < first_row_[file + 1]) ++j;
    TOWER_RETURN_IF_ERROR(
        files_[file]->ReadRecords(first - first_row_[file], j - i, &scratch.record, &examples));
    for (int64_t k = i; k < j; ++k) {
      const Status decoded = DecodeRow(examples[k - i], features + k * feature_dim_,
                                       targets + k * target_dim_, &scratch);
      if (!decoded.ok()) {
        return Status(decoded.code(), DescribeRow(rows[k]) + ": " + decoded.message());
      }
    }
    i = j;
  }
  return OkStatus();
}

std::string TfRecordSource::DescribeRow(int64_t row) const {
  if (row < 0 || row >= num_rows()) return Source::DescribeRow(row);
  const size_t file = static_cast<size_t>(
      std::upper_bound(first_row_.begin(), first_row_.end(), row) - first_row_.begin() - 1);
  return files_[file]->DescribeRecord(row - first_row_[file]);
}

}  // namespace tower::data
