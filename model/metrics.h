// Metrics reported by Fit and Evaluate, accumulated on the host over an epoch, each sample
// weighted equally (as Keras's Mean metrics are).
#ifndef TOWER_MODEL_METRICS_H_
#define TOWER_MODEL_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "util/statusor.h"

namespace tower {

class Metric {
 public:
  virtual ~Metric() = default;
  // The key in logs and histories: "mae", "mse", "accuracy".
  virtual std::string name() const = 0;
  virtual Status CheckShapes(int64_t output_dim, int64_t target_dim) const = 0;
  // pred[rows, output_dim] and targets[rows, target_dim], row-major, on the host.
  virtual void Update(const float* pred, const float* targets, int64_t rows, int64_t output_dim,
                      int64_t target_dim) = 0;
  // The mean so far (NaN before any sample).
  virtual double Result() const = 0;
  virtual void Reset() = 0;
  // The running totals behind Result() (a sum and a count), so a training checkpoint can
  // carry a half-finished epoch's figures across a restart exactly.
  struct Totals {
    double sum = 0;
    int64_t count = 0;
  };
  virtual Totals totals() const = 0;
  virtual void set_totals(const Totals& totals) = 0;
};

// "mae" (mean_absolute_error), "mse" (mean_squared_error), "accuracy"
// (sparse_categorical_accuracy: argmax of the outputs equals the class id).
StatusOr<std::unique_ptr<Metric>> MetricFromName(std::string_view name);

}  // namespace tower

#endif  // TOWER_MODEL_METRICS_H_
