// Learning-rate schedules: the rate as a function of the optimizer's step (the number of
// updates applied before this one, from 0). Keras's ExponentialDecay and PiecewiseConstant,
// and a hook for any function.
#ifndef TOWER_MODEL_LEARNING_RATE_SCHEDULE_H_
#define TOWER_MODEL_LEARNING_RATE_SCHEDULE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "util/statusor.h"

namespace tower {

class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  virtual float operator()(int64_t step) const = 0;
  virtual std::string Describe() const = 0;
};

std::shared_ptr<LearningRateSchedule> ConstantLearningRate(float rate);
// rate · decay_rate^(step / decay_steps), the exponent floored when `staircase`.
StatusOr<std::shared_ptr<LearningRateSchedule>> ExponentialDecay(float initial_rate,
                                                                 int64_t decay_steps,
                                                                 float decay_rate,
                                                                 bool staircase = false);
// values[i] while step < boundaries[i], the last value after: values has one more element.
StatusOr<std::shared_ptr<LearningRateSchedule>> PiecewiseConstant(
    std::vector<int64_t> boundaries, std::vector<float> values);
// Any function of the step (the hook).
std::shared_ptr<LearningRateSchedule> LambdaSchedule(std::function<float(int64_t)> rate,
                                                     std::string description = "lambda");

}  // namespace tower

#endif  // TOWER_MODEL_LEARNING_RATE_SCHEDULE_H_
