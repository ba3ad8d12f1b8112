// Fit's step times (History::step_times, epoch_step_times): the wait for each batch (the
// iterator's Next()) and the steps whole. Lower bounds only, from sleeps the test puts in the
// source and in a callback (a busy machine only makes the figures larger), and the bounds that
// hold by construction: 0 <= wait <= whole, the run's figures the sum of the epochs'.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/source.h"
#include "model/dense.h"
#include "model/sequential.h"

namespace tower {
namespace {

constexpr double kSleepSeconds = 0.020;

// Rows r: feature r / rows, target 2 · feature. Every Read sleeps kSleepSeconds first: a slow
// file or pipeline.
class SleepingSource final : public data::Source {
 public:
  explicit SleepingSource(int64_t rows) : rows_(rows), schema_(data::DefaultSchema(1, 1)) {}

  int64_t num_rows() const override { return rows_; }
  int64_t feature_dim() const override { return 1; }
  int64_t target_dim() const override { return 1; }
  const data::Schema& schema() const override { return schema_; }
  Status Read(const int64_t* rows, int64_t n, float* features, float* targets) const override {
    std::this_thread::sleep_for(std::chrono::duration<double>(kSleepSeconds));
    for (int64_t i = 0; i < n; ++i) {
      features[i] = static_cast<float>(rows[i]) / rows_;
      targets[i] = 2 * features[i];
    }
    return OkStatus();
  }

 private:
  int64_t rows_;
  data::Schema schema_;
};

data::Dataset Sleeping(int64_t rows) {
  StatusOr<data::Dataset> dataset =
      data::Dataset::FromSource(std::make_shared<SleepingSource>(rows));
  TOWER_CHECK_OK(dataset.status());
  return *dataset;
}

// `rows` rows of y = 2x held in memory.
data::Dataset InMemory(int64_t rows) {
  std::vector<float> x(rows), y(rows);
  for (int64_t i = 0; i < rows; ++i) {
    x[i] = static_cast<float>(i) / rows;
    y[i] = 2 * x[i];
  }
  StatusOr<data::Dataset> dataset = data::Dataset::FromTensors(x, 1, y, 1);
  TOWER_CHECK_OK(dataset.status());
  return *dataset;
}

std::unique_ptr<Sequential> Model() {
  auto model = std::make_unique<Sequential>(std::vector<std::shared_ptr<Layer>>{Dense(1)}, 1);
  TOWER_CHECK_OK(model->Compile(MeanSquaredErrorLoss(), SGD(0.1f)));
  return model;
}

// Sleeps after every step, as a slow callback (a logger writing to a slow disk) would.
class SleepAfterStep final : public Callback {
 public:
  explicit SleepAfterStep(double seconds) : seconds_(seconds) {}
  Status OnBatchEnd(Sequential&, int64_t, const Logs&) override {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds_));
    return OkStatus();
  }

 private:
  double seconds_;
};

// What holds for any run: one entry per epoch, 0 <= wait <= whole (false for NaN), and the
// run's figures the sums of the epochs'.
void ExpectConsistent(const History& history) {
  ASSERT_EQ(history.epoch_step_times.size(), history.epochs.size());
  double wait = 0;
  double whole = 0;
  int64_t steps = 0;
  for (size_t e = 0; e < history.epoch_step_times.size(); ++e) {
    const StepTimes& times = history.epoch_step_times[e];
    EXPECT_GE(times.input_wait_seconds, 0) << "epoch " << e;
    EXPECT_LE(times.input_wait_seconds, times.step_seconds) << "epoch " << e;
    wait += times.input_wait_seconds;
    whole += times.step_seconds;
    steps += times.steps;
  }
  EXPECT_DOUBLE_EQ(history.step_times.input_wait_seconds, wait);
  EXPECT_DOUBLE_EQ(history.step_times.step_seconds, whole);
  EXPECT_EQ(history.step_times.steps, steps);
  EXPECT_LE(history.step_times.input_wait_seconds, history.step_times.step_seconds);
}

TEST(FitStepTimesTest, WithoutPrefetchTheStepsWaitForEverySleepOfTheSource) {
  // 64 rows in batches of 8: 8 reads of at least 20 ms each per epoch, all inside Next().
  auto model = Model();
  std::ostringstream out;
  FitOptions options;
  options.epochs = 2;
  options.out = &out;
  StatusOr<History> history = model->Fit(Sleeping(64).Batch(8), options);
  ASSERT_TRUE(history.ok()) << history.status();
  ExpectConsistent(*history);
  ASSERT_EQ(history->epoch_step_times.size(), 2u);
  for (const StepTimes& times : history->epoch_step_times) {
    EXPECT_EQ(times.steps, 8);
    EXPECT_GE(times.input_wait_seconds, 8 * kSleepSeconds);
  }
  EXPECT_EQ(history->step_times.steps, 16);
  EXPECT_GE(history->step_times.input_wait_seconds, 16 * kSleepSeconds);
}

TEST(FitStepTimesTest, TheStepIncludesItsCallbacksAndTheWaitDoesNot) {
  // A callback sleeping 10 ms after each of 8 steps: the steps whole take that longer than
  // their waits (which are at least the source's 8 sleeps).
  auto model = Model();
  std::ostringstream out;
  FitOptions options;
  options.out = &out;
  options.callbacks.push_back(std::make_shared<SleepAfterStep>(0.010));
  StatusOr<History> history = model->Fit(Sleeping(64).Batch(8), options);
  ASSERT_TRUE(history.ok()) << history.status();
  ExpectConsistent(*history);
  const StepTimes& times = history->step_times;
  EXPECT_EQ(times.steps, 8);
  EXPECT_GE(times.input_wait_seconds, 8 * kSleepSeconds);
  EXPECT_GE(times.step_seconds, times.input_wait_seconds + 8 * 0.010);
}

TEST(FitStepTimesTest, InMemoryAndPrefetchedFiguresAreConsistent) {
  // 12 rows in batches of 4, at most 5 steps: 3 steps in epoch 1, 2 in epoch 2.
  FitOptions options;
  options.epochs = 3;
  options.max_steps = 5;
  options.verbose = 0;
  for (const data::Dataset& dataset : {InMemory(12).Batch(4), InMemory(12).Batch(4).Prefetch(2),
                                       Sleeping(12).Batch(4).Prefetch(2)}) {
    SCOPED_TRACE(dataset.DebugString());
    auto model = Model();
    StatusOr<History> history = model->Fit(dataset, options);
    ASSERT_TRUE(history.ok()) << history.status();
    ExpectConsistent(*history);
    ASSERT_EQ(history->epoch_step_times.size(), 2u);
    EXPECT_EQ(history->epoch_step_times[0].steps, 3);
    EXPECT_EQ(history->epoch_step_times[1].steps, 2);
    EXPECT_GT(history->step_times.step_seconds, 0);
  }
}

TEST(FitStepTimesTest, AResumedRunCountsOnlyTheStepsItTrains) {
  // Resumed 3 steps into an epoch of 8: the 3 batches read past are no steps of this run.
  auto model = Model();
  FitOptions options;
  options.verbose = 0;
  FitPosition resume;
  resume.step_in_epoch = 3;
  resume.total_steps = 3;
  resume.loss_sum = 1;
  resume.rows = 24;
  options.resume = resume;
  StatusOr<History> history = model->Fit(InMemory(64).Batch(8), options);
  ASSERT_TRUE(history.ok()) << history.status();
  ExpectConsistent(*history);
  EXPECT_EQ(history->step_times.steps, 5);
}

}  // namespace
}  // namespace tower
