#include "model/learning_rate_schedule.h"

#include <cmath>

namespace tower {
namespace {

class Lambda : public LearningRateSchedule {
 public:
  Lambda(std::function<float(int64_t)> rate, std::string description)
      : rate_(std::move(rate)), description_(std::move(description)) {}
  float operator()(int64_t step) const override { return rate_(step); }
  std::string Describe() const override { return description_; }

 private:
  std::function<float(int64_t)> rate_;
  std::string description_;
};

}  // namespace

std::shared_ptr<LearningRateSchedule> ConstantLearningRate(float rate) {
  return std::make_shared<Lambda>([rate](int64_t) { return rate; }, std::to_string(rate));
}

StatusOr<std::shared_ptr<LearningRateSchedule>> ExponentialDecay(float initial_rate,
                                                                 int64_t decay_steps,
                                                                 float decay_rate,
                                                                 bool staircase) {
  if (decay_steps <= 0 || !(decay_rate > 0)) {
    return InvalidArgumentError("ExponentialDecay: decay_steps and decay_rate must be positive");
  }
  return std::shared_ptr<LearningRateSchedule>(std::make_shared<Lambda>(
      [=](int64_t step) {
        double exponent = static_cast<double>(step) / decay_steps;
        if (staircase) exponent = std::floor(exponent);
        return static_cast<float>(initial_rate * std::pow(double{decay_rate}, exponent));
      },
      "ExponentialDecay(" + std::to_string(initial_rate) + ")"));
}

StatusOr<std::shared_ptr<LearningRateSchedule>> PiecewiseConstant(
    std::vector<int64_t> boundaries, std::vector<float> values) {
  if (values.size() != boundaries.size() + 1) {
    return InvalidArgumentError("PiecewiseConstant: needs one more value than boundaries");
  }
  for (size_t i = 1; i < boundaries.size(); ++i) {
    if (boundaries[i] <= boundaries[i - 1]) {
      return InvalidArgumentError("PiecewiseConstant: boundaries must increase");
    }
  }
  return std::shared_ptr<LearningRateSchedule>(std::make_shared<Lambda>(
      [boundaries, values](int64_t step) {
        size_t i = 0;
        while (i < boundaries.size() && step >= boundaries[i]) ++i;
        return values[i];
      },
      "PiecewiseConstant"));
}

std::shared_ptr<LearningRateSchedule> LambdaSchedule(std::function<float(int64_t)> rate,
                                                     std::string description) {
  return std::make_shared<Lambda>(std::move(rate), std::move(description));
}

}  // namespace tower
