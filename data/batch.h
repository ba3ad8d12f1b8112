// Batch: rows of a dataset on the host, as the model layer consumes them.
#ifndef TOWER_DATA_BATCH_H_
#define TOWER_DATA_BATCH_H_

#include <cstdint>
#include <vector>

namespace tower::data {

// Row-major float32: features [rows, feature_dim], targets [rows, target_dim].
struct Batch {
  int64_t rows = 0;
  int64_t feature_dim = 0;
  int64_t target_dim = 0;
  std::vector<float> features;
  std::vector<float> targets;
  // Position of each row in its source (0-based row index), for error messages and resume;
  // Dataset::DescribeRow turns one into "data.csv:12".
  std::vector<int64_t> source_rows;

  const float* feature_row(int64_t row) const { return features.data() + row * feature_dim; }
  const float* target_row(int64_t row) const { return targets.data() + row * target_dim; }
};

}  // namespace tower::data

#endif  // TOWER_DATA_BATCH_H_
