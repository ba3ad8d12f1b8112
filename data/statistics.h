// Per-column statistics of a dataset: what feature normalization (model/normalization.h)
// and target normalization (tower train --normalize-target) are computed from.
#ifndef TOWER_DATA_STATISTICS_H_
#define TOWER_DATA_STATISTICS_H_

#include <cstdint>
#include <vector>

#include "data/dataset.h"
#include "util/statusor.h"

namespace tower::data {

struct ColumnStatistics {
  std::vector<double> mean;     // per column
  std::vector<double> std_dev;  // population standard deviation, per column
  int64_t rows = 0;
};

enum class Columns { kFeatures, kTargets };

// The mean and population standard deviation of each feature (or target) column over every
// row of `data`, in double precision, in two passes (the mean, then the squared deviations:
// exact enough at any scale). InvalidArgument for endless or empty data.
StatusOr<ColumnStatistics> ComputeColumnStatistics(const Dataset& data, Columns columns);

}  // namespace tower::data

#endif  // TOWER_DATA_STATISTICS_H_
