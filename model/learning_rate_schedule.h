// Learning-rate schedules: the rate as a function of the optimizer's step (the number of
// updates applied before this one, from 0). Keras 3's ExponentialDecay, PiecewiseConstant and
// CosineDecay (keras.optimizers.schedules, same formulas), a linear warmup in front of any
// schedule, a hook for any function, and a parser for a command-line spec.
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
  // One line with the parameters, e.g. "cosine(initial=0.1, decay_steps=1000, alpha=0)":
  // printed by the CLI.
  virtual std::string Describe() const = 0;
};

std::shared_ptr<LearningRateSchedule> ConstantLearningRate(float rate);
// rate · decay_rate^(step / decay_steps), the exponent floored when `staircase` (Keras's
// step decay).
StatusOr<std::shared_ptr<LearningRateSchedule>> ExponentialDecay(float initial_rate,
                                                                 int64_t decay_steps,
                                                                 float decay_rate,
                                                                 bool staircase = false);
// values[i] while step < boundaries[i], the last value after: values has one more element.
StatusOr<std::shared_ptr<LearningRateSchedule>> PiecewiseConstant(
    std::vector<int64_t> boundaries, std::vector<float> values);
// Keras's CosineDecay (without its warmup: see LinearWarmup), computed in double:
//   s = min(step, decay_steps), cosine = ½·(1 + cos(π·s / decay_steps)),
//   rate = initial_rate·((1 − alpha)·cosine + alpha)
// so initial_rate at step 0, falling to alpha·initial_rate at decay_steps and staying there.
// decay_steps > 0, alpha in [0, 1], initial_rate finite and >= 0.
StatusOr<std::shared_ptr<LearningRateSchedule>> CosineDecay(float initial_rate,
                                                            int64_t decay_steps,
                                                            float alpha = 0);
// `after`, preceded by warmup_steps steps whose rate rises linearly from start_rate to
// after(0): start_rate + (after(0) − start_rate)·step / warmup_steps for step < warmup_steps,
// then after(step − warmup_steps): the wrapped schedule starts counting when the warmup ends,
// as in Keras's CosineDecay(warmup_steps=...). warmup_steps > 0, `after` non-null,
// start_rate finite and >= 0.
StatusOr<std::shared_ptr<LearningRateSchedule>> LinearWarmup(
    int64_t warmup_steps, std::shared_ptr<LearningRateSchedule> after, float start_rate = 0);
// Any function of the step (the hook).
std::shared_ptr<LearningRateSchedule> LambdaSchedule(std::function<float(int64_t)> rate,
                                                     std::string description = "lambda");

// The schedule a command-line spec (the --lr-schedule flag) names, starting from
// `initial_rate` (the --learning-rate flag), behind a LinearWarmup from 0 over warmup_steps
// steps when warmup_steps > 0 (0: none). The spec is KIND or KIND:KEY=VALUE,...:
//   constant  (or "")                                    initial_rate throughout
//   exponential:decay_steps=N,decay_rate=R[,staircase]   ExponentialDecay(initial_rate, ...);
//                                                        `staircase` floors the exponent
//   step:boundaries=B1/B2/...,values=V0/V1/...           PiecewiseConstant(boundaries, values);
//                                                        one more value than boundaries, and
//                                                        initial_rate is unused
//   cosine:decay_steps=N[,alpha=A]                       CosineDecay(initial_rate, N, A);
//                                                        alpha defaults to 0
// N and B are integers, R, A and V decimal numbers (e.g. 0.96, 1e-3); keys may come in any
// order, each once. Any error is an InvalidArgumentError that quotes the spec, says which part
// is wrong and shows the kind's grammar, e.g.
//   --lr-schedule 'cosine:decay=10': unknown key 'decay'; cosine takes decay_steps=N[,alpha=A]
StatusOr<std::shared_ptr<LearningRateSchedule>> ParseLearningRateSchedule(
    const std::string& spec, float initial_rate, int64_t warmup_steps = 0);

}  // namespace tower

#endif  // TOWER_MODEL_LEARNING_RATE_SCHEDULE_H_
