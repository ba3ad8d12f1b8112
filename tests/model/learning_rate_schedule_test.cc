// Learning-rate schedules against Keras 3's formulas (keras.optimizers.schedules), written out
// here in double rather than taken from the code under test, and the --lr-schedule spec parser
// with each of its errors.
#include "model/learning_rate_schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tower {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr double kPi = 3.14159265358979323846;

// Within 1e-6 relative (the schedules return float, good to ~6e-8), or 1e-12 absolute near 0.
// EXPECT_NEAR fails on NaN.
void ExpectRate(const LearningRateSchedule& schedule, int64_t step, double expected) {
  EXPECT_NEAR(schedule(step), expected, 1e-6 * std::abs(expected) + 1e-12) << "step " << step;
}

// Keras's CosineDecay (warmup_steps=0).
double KerasCosine(double initial, int64_t decay_steps, double alpha, int64_t step) {
  const double s = static_cast<double>(std::min(step, decay_steps));
  const double cosine = 0.5 * (1.0 + std::cos(kPi * s / static_cast<double>(decay_steps)));
  return initial * ((1.0 - alpha) * cosine + alpha);
}

// Keras's ExponentialDecay.
double KerasExponential(double initial, int64_t decay_steps, double rate, bool staircase,
                        int64_t step) {
  double p = static_cast<double>(step) / static_cast<double>(decay_steps);
  if (staircase) p = std::floor(p);
  return initial * std::pow(rate, p);
}

// The float the schedules take, widened: 0.1f is not 0.1.
double F(float x) { return x; }

TEST(CosineDecayTest, MatchesKerasFormula) {
  for (const float alpha : {0.0f, 0.1f, 1.0f}) {
    SCOPED_TRACE(alpha);
    auto cosine = CosineDecay(0.1f, 1000, alpha);
    ASSERT_TRUE(cosine.ok()) << cosine.status();
    for (const int64_t step : {0, 1, 250, 500, 999, 1000, 1001, 5000}) {
      ExpectRate(**cosine, step, KerasCosine(F(0.1f), 1000, F(alpha), step));
    }
  }
  // Landmarks, by hand: the start, the half-way point, the floor at and past decay_steps.
  auto cosine = *CosineDecay(0.1f, 1000, 0.1f);
  ExpectRate(*cosine, 0, F(0.1f));
  ExpectRate(*cosine, 500, F(0.1f) * ((1 - F(0.1f)) * 0.5 + F(0.1f)));
  ExpectRate(*cosine, 1000, F(0.1f) * F(0.1f));
  ExpectRate(*cosine, 123456, F(0.1f) * F(0.1f));
  // alpha defaults to 0: down to 0.
  ExpectRate(**CosineDecay(2.0f, 10), 10, 0.0);
  ExpectRate(**CosineDecay(2.0f, 10), 5, 1.0);
  EXPECT_EQ(cosine->Describe(), "cosine(initial=0.1, decay_steps=1000, alpha=0.1)");
}

TEST(CosineDecayTest, RejectsBadArguments) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    float initial;
    int64_t decay_steps;
    float alpha;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {0.1f, 0, 0, "CosineDecay: decay_steps must be > 0, got 0"},
           {0.1f, -5, 0, "CosineDecay: decay_steps must be > 0, got -5"},
           {0.1f, 10, -0.5f, "CosineDecay: alpha must be in [0, 1], got -0.5"},
           {0.1f, 10, 1.5f, "CosineDecay: alpha must be in [0, 1], got 1.5"},
           {0.1f, 10, nan, "CosineDecay: alpha must be in [0, 1], got nan"},
           {-1, 10, 0, "CosineDecay: initial_rate must be finite and >= 0, got -1"},
           {nan, 10, 0, "CosineDecay: initial_rate must be finite and >= 0, got nan"},
           {inf, 10, 0, "CosineDecay: initial_rate must be finite and >= 0, got inf"},
       }) {
    auto cosine = CosineDecay(c.initial, c.decay_steps, c.alpha);
    ASSERT_FALSE(cosine.ok()) << c.message;
    EXPECT_EQ(cosine.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(cosine.status().message(), c.message);
  }
}

TEST(LinearWarmupTest, RisesLinearlyThenStartsTheWrappedSchedule) {
  auto cosine = *CosineDecay(0.1f, 1000, 0.0f);
  for (const float start : {0.0f, 0.01f}) {
    SCOPED_TRACE(start);
    auto warmup = LinearWarmup(100, cosine, start);
    ASSERT_TRUE(warmup.ok()) << warmup.status();
    // start + (after(0) − start)·step / 100, after(0) = 0.1 (as a float).
    for (const int64_t step : {0, 1, 50, 99}) {
      ExpectRate(**warmup, step, F(start) + (F(0.1f) - F(start)) * step / 100.0);
    }
    // From step 100 the cosine runs from its own step 0.
    for (const int64_t step : {100, 101, 350, 600, 1099, 1100, 2000}) {
      ExpectRate(**warmup, step, KerasCosine(F(0.1f), 1000, 0, step - 100));
    }
  }
  auto warmup = *LinearWarmup(100, cosine);
  ExpectRate(*warmup, 0, 0.0);
  ExpectRate(*warmup, 50, F(0.1f) / 2);
  ExpectRate(*warmup, 100, F(0.1f));
  ExpectRate(*warmup, 600, F(0.1f) / 2);  // half-way down the cosine
  ExpectRate(*warmup, 1100, 0.0);
  EXPECT_EQ(warmup->Describe(),
            "cosine(initial=0.1, decay_steps=1000, alpha=0) after linear warmup over 100 steps "
            "from 0");
}

TEST(LinearWarmupTest, RejectsBadArguments) {
  auto constant = ConstantLearningRate(0.1f);
  auto zero = LinearWarmup(0, constant);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(), "LinearWarmup: warmup_steps must be > 0, got 0");
  auto negative = LinearWarmup(-3, constant);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().message(), "LinearWarmup: warmup_steps must be > 0, got -3");
  auto null = LinearWarmup(10, nullptr);
  ASSERT_FALSE(null.ok());
  EXPECT_EQ(null.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(null.status().message(), HasSubstr("null"));
  auto below = LinearWarmup(10, constant, -0.5f);
  ASSERT_FALSE(below.ok());
  EXPECT_EQ(below.status().message(), "LinearWarmup: start_rate must be finite and >= 0, got -0.5");
}

TEST(ExponentialDecayTest, SmoothAndStaircase) {
  auto smooth = *ExponentialDecay(0.1f, 10, 0.5f);
  auto stairs = *ExponentialDecay(0.1f, 10, 0.5f, /*staircase=*/true);
  for (const int64_t step : {0, 1, 5, 9, 10, 15, 19, 20, 25, 100}) {
    ExpectRate(*smooth, step, KerasExponential(F(0.1f), 10, 0.5, false, step));
    ExpectRate(*stairs, step, KerasExponential(F(0.1f), 10, 0.5, true, step));
  }
  // The staircase holds each rate for decay_steps steps.
  ExpectRate(*stairs, 9, F(0.1f));
  ExpectRate(*stairs, 10, F(0.1f) / 2);
  ExpectRate(*stairs, 19, F(0.1f) / 2);
  ExpectRate(*stairs, 25, F(0.1f) / 4);
  ExpectRate(*smooth, 5, F(0.1f) * std::sqrt(0.5));
  EXPECT_EQ(smooth->Describe(),
            "exponential(initial=0.1, decay_steps=10, decay_rate=0.5, staircase=false)");
  EXPECT_EQ(stairs->Describe(),
            "exponential(initial=0.1, decay_steps=10, decay_rate=0.5, staircase=true)");
  EXPECT_EQ(ExponentialDecay(1, 0, 0.5f).status().message(),
            "ExponentialDecay: decay_steps must be > 0, got 0");
  EXPECT_EQ(ExponentialDecay(1, 10, -2).status().message(),
            "ExponentialDecay: decay_rate must be finite and > 0, got -2");
}

TEST(PiecewiseConstantTest, ValuesBetweenBoundaries) {
  auto step = *PiecewiseConstant({10, 20}, {0.1f, 0.01f, 0.001f});
  ExpectRate(*step, 0, F(0.1f));
  ExpectRate(*step, 9, F(0.1f));
  ExpectRate(*step, 10, F(0.01f));
  ExpectRate(*step, 19, F(0.01f));
  ExpectRate(*step, 20, F(0.001f));
  ExpectRate(*step, 1000000, F(0.001f));
  EXPECT_EQ(step->Describe(), "step(boundaries=10/20, values=0.1/0.01/0.001)");
  EXPECT_EQ(PiecewiseConstant({10, 20}, {1, 2}).status().message(),
            "PiecewiseConstant: 2 boundaries need 3 values (one more), got 2");
  EXPECT_EQ(PiecewiseConstant({20, 10}, {1, 2, 3}).status().message(),
            "PiecewiseConstant: boundaries must increase, got 10 after 20");
}

TEST(ConstantAndLambdaTest, Describe) {
  auto constant = ConstantLearningRate(0.001f);
  ExpectRate(*constant, 0, F(0.001f));
  ExpectRate(*constant, 1000000, F(0.001f));
  EXPECT_EQ(constant->Describe(), "constant(0.001)");
  EXPECT_EQ(LambdaSchedule([](int64_t) { return 1.0f; }, "one")->Describe(), "one");
}

TEST(ParseLearningRateScheduleTest, Constant) {
  for (const std::string spec : {"", "constant"}) {
    auto schedule = ParseLearningRateSchedule(spec, 0.05f);
    ASSERT_TRUE(schedule.ok()) << schedule.status();
    ExpectRate(**schedule, 0, F(0.05f));
    ExpectRate(**schedule, 12345, F(0.05f));
    EXPECT_EQ((*schedule)->Describe(), "constant(0.05)");
  }
}

TEST(ParseLearningRateScheduleTest, Exponential) {
  auto smooth = ParseLearningRateSchedule("exponential:decay_steps=100,decay_rate=0.96", 0.1f);
  ASSERT_TRUE(smooth.ok()) << smooth.status();
  // Keys in any order; `staircase` floors the exponent.
  auto stairs =
      ParseLearningRateSchedule("exponential:staircase,decay_rate=0.96,decay_steps=100", 0.1f);
  ASSERT_TRUE(stairs.ok()) << stairs.status();
  for (const int64_t step : {0, 50, 99, 100, 150, 1000}) {
    ExpectRate(**smooth, step, KerasExponential(F(0.1f), 100, F(0.96f), false, step));
    ExpectRate(**stairs, step, KerasExponential(F(0.1f), 100, F(0.96f), true, step));
  }
  ExpectRate(**stairs, 150, F(0.1f) * F(0.96f));
  EXPECT_EQ((*stairs)->Describe(),
            "exponential(initial=0.1, decay_steps=100, decay_rate=0.96, staircase=true)");
}

TEST(ParseLearningRateScheduleTest, Step) {
  // initial_rate is unused, even when it is not a rate.
  auto step = ParseLearningRateSchedule("step:boundaries=100/200,values=0.1/0.01/1e-3",
                                        std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(step.ok()) << step.status();
  ExpectRate(**step, 0, F(0.1f));
  ExpectRate(**step, 99, F(0.1f));
  ExpectRate(**step, 100, F(0.01f));
  ExpectRate(**step, 200, F(0.001f));
  EXPECT_EQ((*step)->Describe(), "step(boundaries=100/200, values=0.1/0.01/0.001)");
}

TEST(ParseLearningRateScheduleTest, Cosine) {
  auto plain = ParseLearningRateSchedule("cosine:decay_steps=1000", 0.1f);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto floored = ParseLearningRateSchedule("cosine:alpha=0.05,decay_steps=1000", 0.1f);
  ASSERT_TRUE(floored.ok()) << floored.status();
  for (const int64_t step : {0, 300, 500, 1000, 2000}) {
    ExpectRate(**plain, step, KerasCosine(F(0.1f), 1000, 0, step));
    ExpectRate(**floored, step, KerasCosine(F(0.1f), 1000, F(0.05f), step));
  }
  EXPECT_EQ((*floored)->Describe(), "cosine(initial=0.1, decay_steps=1000, alpha=0.05)");
}

TEST(ParseLearningRateScheduleTest, WarmupWrapsEveryKind) {
  auto cosine = ParseLearningRateSchedule("cosine:decay_steps=1000", 0.1f, 100);
  ASSERT_TRUE(cosine.ok()) << cosine.status();
  ExpectRate(**cosine, 0, 0.0);
  ExpectRate(**cosine, 25, F(0.1f) / 4);
  ExpectRate(**cosine, 100, F(0.1f));
  ExpectRate(**cosine, 400, KerasCosine(F(0.1f), 1000, 0, 300));
  ExpectRate(**cosine, 1100, 0.0);
  EXPECT_EQ((*cosine)->Describe(),
            "cosine(initial=0.1, decay_steps=1000, alpha=0) after linear warmup over 100 steps "
            "from 0");
  auto constant = ParseLearningRateSchedule("", 0.2f, 10);
  ASSERT_TRUE(constant.ok()) << constant.status();
  ExpectRate(**constant, 5, F(0.2f) / 2);
  ExpectRate(**constant, 10, F(0.2f));
  ExpectRate(**constant, 1000, F(0.2f));
  auto step = ParseLearningRateSchedule("step:boundaries=5,values=0.4/0.2", 0.1f, 10);
  ASSERT_TRUE(step.ok()) << step.status();
  ExpectRate(**step, 5, F(0.4f) / 2);  // towards values[0], not initial_rate
  ExpectRate(**step, 14, F(0.4f));
  ExpectRate(**step, 15, F(0.2f));
  auto exponential =
      ParseLearningRateSchedule("exponential:decay_steps=10,decay_rate=0.5,staircase", 0.1f, 10);
  ASSERT_TRUE(exponential.ok()) << exponential.status();
  ExpectRate(**exponential, 5, F(0.1f) / 2);
  ExpectRate(**exponential, 20, F(0.1f) / 2);
  // warmup_steps = 0: no warmup.
  EXPECT_EQ((*ParseLearningRateSchedule("cosine:decay_steps=10", 0.1f, 0))->Describe(),
            "cosine(initial=0.1, decay_steps=10, alpha=0)");
}

TEST(ParseLearningRateScheduleTest, ErrorsNameThePartAndShowTheGrammar) {
  const std::string cosine = "cosine takes decay_steps=N[,alpha=A]";
  const std::string exponential = "exponential takes decay_steps=N,decay_rate=R[,staircase]";
  const std::string step = "step takes boundaries=B1/B2/...,values=V0/V1/...";
  struct Case {
    std::string spec;
    std::vector<std::string> parts;  // each in the message
    float initial_rate = 0.1f;
    int64_t warmup_steps = 0;
  };
  const std::vector<Case> cases = {
      {"linear",
       {"unknown kind 'linear'", "constant", "cosine:decay_steps=N[,alpha=A]", "step:boundaries"}},
      {"Cosine:decay_steps=10", {"unknown kind 'Cosine'"}},
      {":decay_steps=10", {"unknown kind ''"}},
      {"cosine", {"missing parameters", cosine}},
      {"cosine:", {"empty parameter", cosine}},
      {"cosine:decay_steps=10,", {"empty parameter", cosine}},
      {"cosine:decay_steps=10,,alpha=0", {"empty parameter", cosine}},
      {"cosine:alpha=0.1", {"missing key 'decay_steps'", cosine}},
      {"cosine:decay_steps=10,decay_steps=20", {"duplicate key 'decay_steps'", cosine}},
      {"cosine:decay_steps=10,alpha=0,alpha=0", {"duplicate key 'alpha'", cosine}},
      {"cosine:decay_steps", {"'decay_steps' needs a value", cosine}},
      {"cosine:decay_steps=10x", {"decay_steps='10x' is not an integer", cosine}},
      {"cosine:decay_steps=1e3", {"decay_steps='1e3' is not an integer", cosine}},
      {"cosine:decay_steps=", {"decay_steps='' is not an integer", cosine}},
      {"cosine:decay_steps= 10", {"decay_steps=' 10' is not an integer", cosine}},
      {"cosine:decay_steps=99999999999999999999", {"is not an integer", cosine}},
      {"cosine:decay_steps=0", {"decay_steps must be > 0, got 0", cosine}},
      {"cosine:decay_steps=10,alpha=0.1x", {"alpha='0.1x' is not a number", cosine}},
      {"cosine:decay_steps=10,alpha=nan", {"alpha='nan' is not a finite float", cosine}},
      {"cosine:decay_steps=10,alpha=1.5", {"alpha must be in [0, 1], got 1.5", cosine}},
      {"cosine:decay_steps=10,alpha=0.1,staircase", {"unknown key 'staircase'", cosine}},
      {"cosine:decay_steps=10", {"initial rate must be finite and >= 0, got -1", cosine}, -1},
      {"cosine:decay_steps=10", {"warmup_steps must be >= 0", "got -1"}, 0.1f, -1},
      {"exponential:decay_steps=10", {"missing key 'decay_rate'", exponential}},
      {"exponential:decay_rate=0.5", {"missing key 'decay_steps'", exponential}},
      {"exponential:decay_steps=10,decay_rate=0.5,staircase=true",
       {"'staircase' takes no value, got 'staircase=true'", exponential}},
      {"exponential:decay_steps=10,decay_rate=0.5,staircase,staircase",
       {"duplicate key 'staircase'", exponential}},
      {"exponential:decay_steps=10,decay_rate=0", {"decay_rate must be finite and > 0, got 0"}},
      {"exponential:decay_steps=10,decay_rate=1e39",
       {"decay_rate='1e39' is not a finite float"}},
      {"exponential:decay_steps=10,decay_rate=0.5", {"initial rate", "got nan", exponential},
       std::numeric_limits<float>::quiet_NaN()},
      {"step:values=0.1", {"missing key 'boundaries'", step}},
      {"step:boundaries=10/20,values=0.1/0.01", {"2 boundaries need 3 values", step}},
      {"step:boundaries=20/10,values=1/2/3", {"boundaries must increase, got 10 after 20", step}},
      {"step:boundaries=10/x,values=1/2/3", {"boundaries='10/x': 'x' is not an integer", step}},
      {"step:boundaries=10//20,values=1/2/3/4", {"boundaries='10//20': '' is not an integer"}},
      {"step:boundaries=10,values=0.1/zero", {"values='0.1/zero': 'zero' is not a number", step}},
      {"step:boundaries=10,values=0.1/-0.1", {"values: -0.1 is negative", step}},
      {"constant:0.1", {"unexpected parameters '0.1'", "constant takes no parameters"}},
      {"constant", {"initial rate must be finite and >= 0, got inf"},
       std::numeric_limits<float>::infinity()},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    auto schedule = ParseLearningRateSchedule(c.spec, c.initial_rate, c.warmup_steps);
    ASSERT_FALSE(schedule.ok()) << (*schedule)->Describe();
    EXPECT_EQ(schedule.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(schedule.status().message(), StartsWith("--lr-schedule '" + c.spec + "': "));
    for (const std::string& part : c.parts) {
      EXPECT_THAT(schedule.status().message(), HasSubstr(part));
    }
  }
  // The whole message, as the CLI prints it.
  EXPECT_EQ(ParseLearningRateSchedule("cosine:decay=10", 0.1f).status().message(),
            "--lr-schedule 'cosine:decay=10': unknown key 'decay'; cosine takes "
            "decay_steps=N[,alpha=A]");
  EXPECT_EQ(ParseLearningRateSchedule("linear", 0.1f).status().message(),
            "--lr-schedule 'linear': unknown kind 'linear'; the schedules are constant | "
            "exponential:decay_steps=N,decay_rate=R[,staircase] | "
            "step:boundaries=B1/B2/...,values=V0/V1/... | cosine:decay_steps=N[,alpha=A]");
}

}  // namespace
}  // namespace tower
