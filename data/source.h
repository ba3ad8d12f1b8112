// Source: random-access rows, the bottom of every Dataset pipeline.
//
// A source is immutable once built and shared (std::shared_ptr<const Source>) by every copy
// of a Dataset and every iterator over it, possibly from several threads at once. Pipelines
// work on row indices (shuffle, repeat, take) and ask the source for rows only when they
// build a batch, so a source's Read is the only place row data is touched.
#ifndef TOWER_DATA_SOURCE_H_
#define TOWER_DATA_SOURCE_H_

#include <cstdint>
#include <string>

#include "data/schema.h"
#include "util/status.h"

namespace tower::data {

class Source {
 public:
  virtual ~Source() = default;

  // Rows in the source; -1 for an endless source (rows 0, 1, ... up to INT64_MAX).
  virtual int64_t num_rows() const = 0;
  virtual int64_t feature_dim() const = 0;
  virtual int64_t target_dim() const = 0;
  virtual const Schema& schema() const = 0;

  // Copies rows rows[0..n) into features [n, feature_dim] and targets [n, target_dim]
  // (row-major). Every row index is in [0, num_rows()). Must be safe to call from several
  // threads at once. Sources that can fail (a file read lazily) return the error here.
  virtual Status Read(const int64_t* rows, int64_t n, float* features, float* targets) const = 0;

  // Where row `row` comes from, for messages: "row 12" by default, "data.csv:14" for a file.
  virtual std::string DescribeRow(int64_t row) const;
};

}  // namespace tower::data

#endif  // TOWER_DATA_SOURCE_H_
