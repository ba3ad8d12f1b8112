#include "data/statistics.h"

#include <cmath>
#include <memory>
#include <optional>

namespace tower::data {

StatusOr<ColumnStatistics> ComputeColumnStatistics(const Dataset& data, Columns columns) {
  TOWER_RETURN_IF_ERROR(data.status());
  if (data.num_rows() < 0) return InvalidArgumentError("column statistics of endless data");
  const int64_t dim = columns == Columns::kFeatures ? data.feature_dim() : data.target_dim();
  ColumnStatistics stats;
  stats.mean.assign(dim, 0.0);
  std::vector<double> squares(dim, 0.0);
  for (int pass = 0; pass < 2; ++pass) {
    TOWER_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> it, data.Batch(4096).MakeIterator());
    while (true) {
      TOWER_ASSIGN_OR_RETURN(std::optional<Batch> batch, it->Next());
      if (!batch.has_value()) break;
      const std::vector<float>& values =
          columns == Columns::kFeatures ? batch->features : batch->targets;
      for (int64_t r = 0; r < batch->rows; ++r) {
        for (int64_t j = 0; j < dim; ++j) {
          const double v = values[r * dim + j];
          if (pass == 0) {
            stats.mean[j] += v;
          } else {
            squares[j] += (v - stats.mean[j]) * (v - stats.mean[j]);
          }
        }
      }
      if (pass == 0) stats.rows += batch->rows;
    }
    if (stats.rows == 0) return InvalidArgumentError("column statistics of data without rows");
    if (pass == 0) {
      for (double& m : stats.mean) m /= static_cast<double>(stats.rows);
    }
  }
  stats.std_dev.resize(dim);
  for (int64_t j = 0; j < dim; ++j) {
    stats.std_dev[j] = std::sqrt(squares[j] / static_cast<double>(stats.rows));
  }
  return stats;
}

}  // namespace tower::data
