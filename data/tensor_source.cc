#include "data/tensor_source.h"

#include <cstring>
#include <utility>

namespace tower::data {

namespace {

Status CheckNames(const std::vector<std::string>& names, int64_t dim, const char* what) {
  if (static_cast<int64_t>(names.size()) != dim) {
    return InvalidArgumentError(std::string("FromTensors: the schema names ") +
                                std::to_string(names.size()) + " " + what + " columns, the data has " +
                                std::to_string(dim));
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::shared_ptr<const TensorSource>> TensorSource::Create(
    std::vector<float> features, int64_t feature_dim, std::vector<float> targets,
    int64_t target_dim, Schema schema, std::string origin, std::vector<int64_t> lines) {
  if (feature_dim < 1) {
    return InvalidArgumentError("FromTensors: feature_dim must be at least 1, got " +
                                std::to_string(feature_dim));
  }
  if (target_dim < 0) {
    return InvalidArgumentError("FromTensors: target_dim must be 0 or more, got " +
                                std::to_string(target_dim));
  }
  const int64_t feature_count = static_cast<int64_t>(features.size());
  if (feature_count % feature_dim != 0) {
    return InvalidArgumentError("FromTensors: " + std::to_string(feature_count) +
                                " feature values do not make whole rows of " +
                                std::to_string(feature_dim));
  }
  const int64_t rows = feature_count / feature_dim;
  const int64_t target_count = static_cast<int64_t>(targets.size());
  if (target_count != rows * target_dim) {
    return InvalidArgumentError("FromTensors: the features have " + std::to_string(rows) +
                                " rows of " + std::to_string(feature_dim) + ", so " +
                                std::to_string(rows * target_dim) + " target values (" +
                                std::to_string(rows) + " rows of " + std::to_string(target_dim) +
                                ") were expected, got " + std::to_string(target_count));
  }
  if (schema.feature_names.empty() && schema.target_names.empty()) {
    schema = DefaultSchema(feature_dim, target_dim);
  } else {
    TOWER_RETURN_IF_ERROR(CheckNames(schema.feature_names, feature_dim, "feature"));
    TOWER_RETURN_IF_ERROR(CheckNames(schema.target_names, target_dim, "target"));
  }
  if (!lines.empty() && static_cast<int64_t>(lines.size()) != rows) {
    return InvalidArgumentError("FromTensors: " + std::to_string(lines.size()) +
                                " line numbers for " + std::to_string(rows) + " rows");
  }
  std::shared_ptr<TensorSource> source(new TensorSource());
  source->rows_ = rows;
  source->feature_dim_ = feature_dim;
  source->target_dim_ = target_dim;
  source->features_ = std::move(features);
  source->targets_ = std::move(targets);
  source->schema_ = std::move(schema);
  source->origin_ = std::move(origin);
  source->lines_ = std::move(lines);
  return std::shared_ptr<const TensorSource>(std::move(source));
}

Status TensorSource::Read(const int64_t* rows, int64_t n, float* features, float* targets) const {
  const size_t feature_row_bytes = static_cast<size_t>(feature_dim_) * sizeof(float);
  const size_t target_row_bytes = static_cast<size_t>(target_dim_) * sizeof(float);
  int64_t i = 0;
  while (i < n) {
    // The run rows[i..j) of consecutive indices is contiguous in both arrays.
    const int64_t first = rows[i];
    int64_t j = i + 1;
    while (j < n && rows[j] == first + (j - i)) ++j;
    const size_t count = static_cast<size_t>(j - i);
    std::memcpy(features + i * feature_dim_, features_.data() + first * feature_dim_,
                count * feature_row_bytes);
    if (target_dim_ > 0) {
      std::memcpy(targets + i * target_dim_, targets_.data() + first * target_dim_,
                  count * target_row_bytes);
    }
    i = j;
  }
  return OkStatus();
}

std::string TensorSource::DescribeRow(int64_t row) const {
  if (!lines_.empty() && row >= 0 && row < rows_) {
    return origin_ + ":" + std::to_string(lines_[static_cast<size_t>(row)]);
  }
  if (!origin_.empty()) return origin_ + ": row " + std::to_string(row);
  return Source::DescribeRow(row);
}

}  // namespace tower::data
