#include "model/metrics.h"

#include <cmath>
#include <limits>

namespace tower {
namespace {

// Mean of a per-element quantity over every output of every row.
class ElementwiseMean : public Metric {
 public:
  ElementwiseMean(std::string name, bool squared) : name_(std::move(name)), squared_(squared) {}
  std::string name() const override { return name_; }
  Status CheckShapes(int64_t output_dim, int64_t target_dim) const override {
    if (output_dim == target_dim) return OkStatus();
    return InvalidArgumentError("metric " + name_ + " needs as many outputs as targets; got " +
                                std::to_string(output_dim) + " and " +
                                std::to_string(target_dim));
  }
  void Update(const float* pred, const float* targets, int64_t rows, int64_t output_dim,
              int64_t) override {
    const int64_t n = rows * output_dim;
    for (int64_t i = 0; i < n; ++i) {
      const double d = double{pred[i]} - targets[i];
      sum_ += squared_ ? d * d : std::fabs(d);
    }
    count_ += n;
  }
  double Result() const override {
    return count_ == 0 ? std::numeric_limits<double>::quiet_NaN() : sum_ / count_;
  }
  void Reset() override {
    sum_ = 0;
    count_ = 0;
  }
  Totals totals() const override { return {sum_, count_}; }
  void set_totals(const Totals& totals) override {
    sum_ = totals.sum;
    count_ = totals.count;
  }

 private:
  std::string name_;
  bool squared_;
  double sum_ = 0;
  int64_t count_ = 0;
};

class SparseCategoricalAccuracy : public Metric {
 public:
  std::string name() const override { return "accuracy"; }
  Status CheckShapes(int64_t output_dim, int64_t target_dim) const override {
    if (target_dim == 1 && output_dim >= 2) return OkStatus();
    return InvalidArgumentError("metric accuracy needs one class-id target and at least two "
                                "outputs; got " + std::to_string(target_dim) + " and " +
                                std::to_string(output_dim));
  }
  void Update(const float* pred, const float* targets, int64_t rows, int64_t output_dim,
              int64_t) override {
    for (int64_t i = 0; i < rows; ++i) {
      const float* row = pred + i * output_dim;
      int64_t best = 0;
      for (int64_t j = 1; j < output_dim; ++j) {
        if (row[j] > row[best]) best = j;
      }
      correct_ += static_cast<float>(best) == targets[i] ? 1 : 0;
    }
    count_ += rows;
  }
  double Result() const override {
    return count_ == 0 ? std::numeric_limits<double>::quiet_NaN()
                       : static_cast<double>(correct_) / count_;
  }
  void Reset() override {
    correct_ = 0;
    count_ = 0;
  }
  Totals totals() const override { return {static_cast<double>(correct_), count_}; }
  void set_totals(const Totals& totals) override {
    correct_ = static_cast<int64_t>(totals.sum);
    count_ = totals.count;
  }

 private:
  int64_t correct_ = 0;
  int64_t count_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Metric>> MetricFromName(std::string_view name) {
  if (name == "mae" || name == "mean_absolute_error") {
    return std::unique_ptr<Metric>(new ElementwiseMean("mae", false));
  }
  if (name == "mse" || name == "mean_squared_error") {
    return std::unique_ptr<Metric>(new ElementwiseMean("mse", true));
  }
  if (name == "accuracy" || name == "sparse_categorical_accuracy") {
    return std::unique_ptr<Metric>(new SparseCategoricalAccuracy());
  }
  return InvalidArgumentError("unknown metric '" + std::string(name) +
                              "'; use mae, mse or accuracy");
}

}  // namespace tower
