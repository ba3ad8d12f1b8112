// TensorSource: rows held in memory as two row-major float32 arrays.
#ifndef TOWER_DATA_TENSOR_SOURCE_H_
#define TOWER_DATA_TENSOR_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/schema.h"
#include "data/source.h"
#include "util/statusor.h"

namespace tower::data {

class TensorSource final : public Source {
 public:
  // features: [rows, feature_dim]; targets: [rows, target_dim]. feature_dim >= 1,
  // target_dim >= 0 (0: no targets, `targets` empty). An empty schema gets DefaultSchema
  // names; a given one must name every column.
  //
  // `origin` and `lines` (optional) say where the rows were read from: DescribeRow(r)
  // gives "<origin>:<lines[r]>" (CSV files keep their 1-based line numbers this way).
  static StatusOr<std::shared_ptr<const TensorSource>> Create(
      std::vector<float> features, int64_t feature_dim, std::vector<float> targets,
      int64_t target_dim, Schema schema = {}, std::string origin = "",
      std::vector<int64_t> lines = {});

  int64_t num_rows() const override { return rows_; }
  int64_t feature_dim() const override { return feature_dim_; }
  int64_t target_dim() const override { return target_dim_; }
  const Schema& schema() const override { return schema_; }
  // One memcpy per run of consecutive row indices (a whole batch when unshuffled).
  Status Read(const int64_t* rows, int64_t n, float* features, float* targets) const override;
  std::string DescribeRow(int64_t row) const override;

  const std::vector<float>& features() const { return features_; }
  const std::vector<float>& targets() const { return targets_; }

 private:
  TensorSource() = default;

  int64_t rows_ = 0;
  int64_t feature_dim_ = 0;
  int64_t target_dim_ = 0;
  std::vector<float> features_;
  std::vector<float> targets_;
  Schema schema_;
  std::string origin_;
  std::vector<int64_t> lines_;
};

}  // namespace tower::data

#endif  // TOWER_DATA_TENSOR_SOURCE_H_
