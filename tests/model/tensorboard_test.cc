// TensorBoard scalars (model/tensorboard), read back by an independent reader: the Python
// script read_tensorboard_events.py checks every record's CRCs with python3-crc32c and
// parses every Event with message classes it builds from TensorBoard's field numbers (not
// from our event.proto). Checked here: Keras's layout (train/ and validation/), every step
// scalar at every step equal to what the callback saw (a second callback records the same
// logs and Sequential::last_step_stats()), the epoch scalars, loss scaling's scale and its
// skipped steps, update frequencies, the chief-only rule, damaged files (a flipped byte, a
// truncated record) named by record index, an unwritable directory named by path, and the
// gradient norm the step records against one computed by hand from ComputeGradients.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "device/context.h"
#include "device/testing/fake_gpu_platform.h"
#include "model/dense.h"
#include "model/learning_rate_schedule.h"
#include "model/sequential.h"
#include "model/tensorboard/event_file_writer.h"
#include "model/tensorboard/tensorboard_callback.h"
#include "strategy/mirrored_strategy.h"
#include "tests/testing/inject_nonfinite_layer.h"
#include "tests/testing/run_program.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::InjectNonFiniteLayer;
using testing::MakeContextWithFakeGpus;
using Json = nlohmann::json;

// A fresh, empty directory under the test's temporary directory.
std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The files of `dir` whose name holds "tfevents" (TensorBoard's rule).
std::vector<std::string> EventFiles(const std::string& dir) {
  std::vector<std::string> files;
  if (!std::filesystem::is_directory(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().find("tfevents") != std::string::npos) {
      files.push_back(entry.path().string());
    }
  }
  return files;
}

// Debian's python3, where python3-protobuf and python3-crc32c are installed (./bazelw).
testing::ProgramOutput RunReader(const std::string& path) {
  return testing::RunCommand("/usr/bin/python3 " +
                             testing::Runfile("tests/model/read_tensorboard_events.py") + " " +
                             path);
}

// The reader's JSON for a file it must accept.
Json Read(const std::string& path) {
  const testing::ProgramOutput out = RunReader(path);
  EXPECT_EQ(out.exit_code, 0) << out.text;
  if (out.exit_code != 0) return Json::object();
  return Json::parse(out.text);
}

// The one event file of `dir`, read.
Json ReadDir(const std::string& dir) {
  const std::vector<std::string> files = EventFiles(dir);
  EXPECT_EQ(files.size(), 1u) << dir;
  if (files.size() != 1) return Json::object();
  return Read(files[0]);
}

// The value the file holds for `tag` at `step` (NaN when absent).
double Scalar(const Json& events, const std::string& tag, int64_t step) {
  if (!events.contains("scalars") || !events["scalars"].contains(tag)) return NAN;
  const Json& steps = events["scalars"][tag];
  const std::string key = std::to_string(step);
  return steps.contains(key) ? steps[key].get<double>() : NAN;
}

std::set<std::string> Tags(const Json& events) {
  std::set<std::string> tags;
  for (const auto& [tag, steps] : events["scalars"].items()) tags.insert(tag);
  return tags;
}

std::set<int64_t> Steps(const Json& events, const std::string& tag) {
  std::set<int64_t> steps;
  if (!events["scalars"].contains(tag)) return steps;
  for (const auto& [step, value] : events["scalars"][tag].items()) steps.insert(std::stoll(step));
  return steps;
}

// What the TensorBoard callback saw: the logs of each step and epoch, and the step's stats.
class Recorder : public Callback {
 public:
  struct Step {
    Logs logs;
    StepStats stats;
  };
  Status OnBatchEnd(Sequential& model, int64_t step, const Logs& logs) override {
    steps.push_back({logs, model.last_step_stats()});
    return OkStatus();
  }
  Status OnEpochEnd(Sequential& model, int epoch, const Logs& logs) override {
    epochs.push_back(logs);
    return OkStatus();
  }
  std::vector<Step> steps;
  std::vector<Logs> epochs;
};

data::Dataset Synthetic(const std::string& name, int64_t rows, uint64_t seed) {
  data::SyntheticOptions options;
  options.name = name;
  options.rows = rows;
  options.seed = seed;
  return *data::Dataset::Synthetic(options);
}

// A model on `replicas` logical CPUs (0: no strategy, the default device).
struct Trainer {
  explicit Trainer(int replicas, std::vector<std::shared_ptr<Layer>> layers, bool share = true)
      : context(MakeContextWithFakeGpus({})) {
    TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
        context->ListPhysicalDevices("CPU")[0],
        std::vector<LogicalDeviceConfiguration>(std::max(replicas, 1))));
    use = std::make_unique<ScopedDefaultContext>(*context);
    if (replicas > 0) {
      MirroredStrategyOptions options;
      options.context = context.get();
      options.share_variables = share;
      strategy = std::move(MirroredStrategy::Create(options)).value();
    }
    model = std::make_unique<Sequential>(std::move(layers), 7);
  }
  void Compile(std::unique_ptr<Optimizer> optimizer, std::vector<std::string> metrics = {}) {
    std::unique_ptr<DistributionScope> scope;
    if (strategy != nullptr) scope = strategy->Scope();
    TOWER_CHECK_OK(model->Compile(MeanSquaredErrorLoss(), std::move(optimizer), metrics));
  }
  std::unique_ptr<Context> context;
  std::unique_ptr<ScopedDefaultContext> use;
  std::unique_ptr<MirroredStrategy> strategy;
  std::unique_ptr<Sequential> model;
};

std::unique_ptr<Optimizer> DecayingSgd() {
  auto optimizer = SGD(0.05f, 0.5f);
  optimizer->set_schedule(
      *ParseLearningRateSchedule("exponential:decay_steps=10,decay_rate=0.5", 0.05f));
  return optimizer;
}

// 2 replicas, every step logged, validation data: Keras's layout, every scalar of every
// step 1..50 and of every epoch as the callback saw it.
TEST(TensorBoardTest, EveryStepAndEpochOnTwoReplicasWithValidation) {
  Trainer trainer(2, {Dense(8, "tanh"), Dense(1)});
  trainer.Compile(DecayingSgd(), {"mae"});
  const std::string dir = FreshDir("every_step");
  const data::Dataset training = Synthetic("linreg", 320, 3).Batch(32);  // 10 steps an epoch
  const data::Dataset validation = Synthetic("linreg", 64, 4).Batch(32);
  auto recorder = std::make_shared<Recorder>();
  FitOptions fit;
  fit.epochs = 5;
  fit.verbose = 0;
  fit.validation = &validation;
  fit.callbacks = {std::make_shared<TensorBoard>(dir + "/", 1), recorder};
  StatusOr<History> history = trainer.model->Fit(training, fit);
  ASSERT_TRUE(history.ok()) << history.status();
  ASSERT_EQ(recorder->steps.size(), 50u);
  EXPECT_FALSE(trainer.model->record_gradient_norm());  // turned off again at the end

  const Json train = ReadDir(dir + "/train");
  const Json val = ReadDir(dir + "/validation");
  EXPECT_EQ(train["file_version"], "brain.Event:2");
  EXPECT_EQ(val["file_version"], "brain.Event:2");
  EXPECT_EQ(train["records"], 1 + 50 + 5);  // the version, one event per step, per epoch
  EXPECT_EQ(val["records"], 1 + 5);
  const std::set<std::string> step_tags = {"batch_loss",           "batch_mae",
                                           "learning_rate",        "gradient_global_norm",
                                           "step_time_ms",         "all_reduce_time_ms"};
  std::set<std::string> train_tags = step_tags;
  train_tags.insert({"epoch_loss", "epoch_mae"});
  EXPECT_EQ(Tags(train), train_tags);  // no loss_scale: loss scaling is off
  EXPECT_EQ(Tags(val), (std::set<std::string>{"epoch_loss", "epoch_mae"}));
  for (const std::string& tag : train_tags) EXPECT_EQ(train["plugins"][tag], "scalars") << tag;

  for (int64_t step = 1; step <= 50; ++step) {
    const Recorder::Step& seen = recorder->steps[step - 1];
    SCOPED_TRACE("step " + std::to_string(step));
    EXPECT_EQ(seen.stats.iteration, step - 1);
    EXPECT_EQ(Scalar(train, "batch_loss", step), static_cast<float>(seen.logs.at("loss")));
    EXPECT_EQ(Scalar(train, "batch_mae", step), static_cast<float>(seen.logs.at("mae")));
    EXPECT_EQ(Scalar(train, "learning_rate", step), seen.stats.learning_rate);
    EXPECT_FLOAT_EQ(seen.stats.learning_rate, 0.05f * std::pow(0.5f, (step - 1) / 10.0f));
    EXPECT_EQ(Scalar(train, "gradient_global_norm", step),
              static_cast<float>(seen.stats.gradient_global_norm));
    EXPECT_TRUE(std::isfinite(seen.stats.gradient_global_norm) &&
                seen.stats.gradient_global_norm > 0);
    EXPECT_EQ(Scalar(train, "step_time_ms", step),
              static_cast<float>(seen.stats.step_seconds * 1e3));
    EXPECT_EQ(Scalar(train, "all_reduce_time_ms", step),
              static_cast<float>(seen.stats.all_reduce_seconds * 1e3));
    EXPECT_GT(seen.stats.step_seconds, 0);
    EXPECT_GT(seen.stats.all_reduce_seconds, 0);
    EXPECT_LT(seen.stats.all_reduce_seconds, seen.stats.step_seconds);
    EXPECT_EQ(seen.stats.loss_scale, 0);
    EXPECT_FALSE(seen.stats.skipped);
  }
  for (const std::string& tag : step_tags) {
    EXPECT_EQ(Steps(train, tag).size(), 50u) << tag;
  }
  ASSERT_EQ(history->epochs.size(), 5u);
  for (int epoch = 0; epoch < 5; ++epoch) {
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    const Logs& logs = history->epochs[epoch];
    EXPECT_EQ(recorder->epochs[epoch], logs);
    EXPECT_EQ(Scalar(train, "epoch_loss", epoch), static_cast<float>(logs.at("loss")));
    EXPECT_EQ(Scalar(train, "epoch_mae", epoch), static_cast<float>(logs.at("mae")));
    EXPECT_EQ(Scalar(val, "epoch_loss", epoch), static_cast<float>(logs.at("val_loss")));
    EXPECT_EQ(Scalar(val, "epoch_mae", epoch), static_cast<float>(logs.at("val_mae")));
  }
  // The epoch's last step logs the epoch's mean: the same figure, at two places.
  EXPECT_EQ(Scalar(train, "batch_loss", 10), Scalar(train, "epoch_loss", 0));
}

// Loss scaling on 2 replicas, two steps overflowing on replica 0 (which computes both
// replicas' rows as one batch): loss_scale at every step as the step used it, the skipped
// steps logged (no gradient norm, whose sums overflowed), the scale halving after each and
// doubling after 4 good steps.
TEST(TensorBoardTest, LossScaleAndSkippedSteps) {
  Trainer trainer(2, {Dense(8, "tanh"), std::make_shared<InjectNonFiniteLayer>(0, std::set<int>{3, 20}),
                      Dense(1)});
  trainer.Compile(Adam(0.01f));
  TOWER_CHECK_OK(trainer.model->SetLossScaling(LossScaleOptions{1024, 4}));
  const std::string dir = FreshDir("loss_scale");
  const data::Dataset training = Synthetic("linreg", 50 * 16, 5).Batch(16);
  auto recorder = std::make_shared<Recorder>();
  FitOptions fit;
  fit.verbose = 0;
  fit.callbacks = {std::make_shared<TensorBoard>(dir, 1), recorder};
  StatusOr<History> history = trainer.model->Fit(training, fit);
  ASSERT_TRUE(history.ok()) << history.status();
  ASSERT_EQ(recorder->steps.size(), 50u);
  EXPECT_EQ(trainer.model->optimizer()->iterations(), 48);  // two steps skipped
  EXPECT_FALSE(std::filesystem::exists(dir + "/validation"));

  const Json train = ReadDir(dir + "/train");
  EXPECT_EQ(Steps(train, "loss_scale").size(), 50u);
  EXPECT_EQ(Steps(train, "batch_loss").size(), 50u);  // a skipped step is logged too
  EXPECT_EQ(Steps(train, "gradient_global_norm").size(), 48u);
  for (int64_t step = 1; step <= 50; ++step) {
    const Recorder::Step& seen = recorder->steps[step - 1];
    SCOPED_TRACE("step " + std::to_string(step));
    const bool skipped = step == 3 || step == 20;
    EXPECT_EQ(seen.stats.skipped, skipped);
    EXPECT_EQ(Scalar(train, "loss_scale", step), seen.stats.loss_scale);
    EXPECT_EQ(Scalar(train, "batch_loss", step), static_cast<float>(seen.logs.at("loss")));
    EXPECT_EQ(Scalar(train, "learning_rate", step), 0.01f);
    if (skipped) {
      EXPECT_TRUE(std::isnan(Scalar(train, "gradient_global_norm", step)));
    } else {
      EXPECT_EQ(Scalar(train, "gradient_global_norm", step),
                static_cast<float>(seen.stats.gradient_global_norm));
    }
  }
  EXPECT_EQ(Scalar(train, "loss_scale", 1), 1024);
  EXPECT_EQ(Scalar(train, "loss_scale", 3), 1024);  // what the skipped step used
  EXPECT_EQ(Scalar(train, "loss_scale", 4), 512);   // halved after it
  EXPECT_EQ(Scalar(train, "loss_scale", 8), 1024);  // doubled after 4 good steps
}

// update_freq N: the step scalars of every N-th step; "epoch": none. No validation data:
// no validation directory.
TEST(TensorBoardTest, UpdateFrequencies) {
  for (const std::string freq : {"5", "epoch"}) {
    SCOPED_TRACE(freq);
    Trainer trainer(0, {Dense(1)});
    trainer.Compile(SGD(0.1f));
    const std::string dir = FreshDir("freq_" + freq);
    const data::Dataset training = Synthetic("linreg", 160, 6).Batch(16);
    FitOptions fit;
    fit.verbose = 0;
    fit.epochs = 2;
    fit.callbacks = {std::make_shared<TensorBoard>(dir, *TensorBoard::ParseUpdateFreq(freq))};
    ASSERT_TRUE(trainer.model->Fit(training, fit).ok());
    const Json train = ReadDir(dir + "/train");
    EXPECT_FALSE(std::filesystem::exists(dir + "/validation"));
    EXPECT_EQ(Steps(train, "epoch_loss"), (std::set<int64_t>{0, 1}));
    if (freq == "5") {
      EXPECT_EQ(Steps(train, "batch_loss"), (std::set<int64_t>{5, 10, 15, 20}));
      EXPECT_EQ(Steps(train, "gradient_global_norm"), (std::set<int64_t>{5, 10, 15, 20}));
    } else {
      EXPECT_EQ(Tags(train), (std::set<std::string>{"epoch_loss"}));
      EXPECT_FALSE(trainer.model->last_step_stats().gradient_global_norm ==
                   trainer.model->last_step_stats().gradient_global_norm);  // NaN: not asked
    }
  }
  // A second run of the same model continues the step axis from the optimizer's count.
  Trainer trainer(0, {Dense(1)});
  trainer.Compile(SGD(0.1f));
  const std::string dir = FreshDir("continued");
  const data::Dataset training = Synthetic("linreg", 32, 6).Batch(16);
  for (int run = 0; run < 2; ++run) {
    FitOptions fit;
    fit.verbose = 0;
    fit.callbacks = {std::make_shared<TensorBoard>(dir + "/run" + std::to_string(run), 1)};
    ASSERT_TRUE(trainer.model->Fit(training, fit).ok());
  }
  EXPECT_EQ(Steps(ReadDir(dir + "/run1/train"), "batch_loss"), (std::set<int64_t>{3, 4}));
}

TEST(TensorBoardTest, ParseUpdateFreq) {
  EXPECT_EQ(*TensorBoard::ParseUpdateFreq("epoch"), 0);
  EXPECT_EQ(*TensorBoard::ParseUpdateFreq("batch"), 1);
  EXPECT_EQ(*TensorBoard::ParseUpdateFreq("100"), 100);
  for (const char* bad : {"", "0", "-3", "steps", "1e3", "99999999999999999999"}) {
    StatusOr<int64_t> parsed = TensorBoard::ParseUpdateFreq(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("'" + std::string(bad) + "'"));
  }
}

// A process that is not the chief writes nothing.
class NotChief : public SingleDeviceDistribution {
 public:
  using SingleDeviceDistribution::SingleDeviceDistribution;
  bool is_chief() const override { return false; }
};

TEST(TensorBoardTest, OnlyTheChiefWrites) {
  NotChief worker(*Context::Default().DefaultDevice());
  Sequential model({Dense(1)}, 1);
  {
    DistributionScope scope(worker);
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.1f)));
  }
  const std::string dir = FreshDir("not_chief") + "/logs";
  const data::Dataset training = Synthetic("linreg", 32, 6).Batch(16);
  FitOptions fit;
  fit.verbose = 0;
  fit.callbacks = {std::make_shared<TensorBoard>(dir, 1)};
  ASSERT_TRUE(model.Fit(training, fit).ok());
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_FALSE(model.record_gradient_norm());
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Where each record of a well-formed TFRecord file starts, from their length fields.
std::vector<size_t> RecordStarts(const std::string& bytes) {
  std::vector<size_t> starts;
  for (size_t at = 0; at < bytes.size();) {
    starts.push_back(at);
    uint64_t length = 0;
    for (int i = 0; i < 8; ++i) length |= uint64_t{static_cast<uint8_t>(bytes[at + i])} << (8 * i);
    at += 8 + 4 + length + 4;
  }
  return starts;
}

TEST(TensorBoardTest, TheReaderNamesADamagedRecord) {
  const std::string dir = FreshDir("damaged");
  std::string path;
  {
    auto writer = tensorboard::EventFileWriter::Create(dir).value();
    path = writer->path();
    for (int step = 1; step <= 6; ++step) {
      TOWER_CHECK_OK(writer->WriteScalars(step, {{"loss", 1.0f / step}, {"lr", 0.5f}}, 1e9));
    }
    TOWER_CHECK_OK(writer->WriteScalar("extra", 7, 3.25f, 1e9));
    TOWER_CHECK_OK(writer->Close());
    EXPECT_THAT(writer->WriteScalar("late", 8, 1, 1e9).message(), HasSubstr("closed"));
  }
  EXPECT_THAT(path, HasSubstr(dir + "/events.out.tfevents."));
  const Json events = Read(path);
  EXPECT_EQ(events["records"], 8);
  EXPECT_EQ(Scalar(events, "loss", 4), 0.25);
  EXPECT_EQ(Scalar(events, "lr", 6), 0.5);
  EXPECT_EQ(Scalar(events, "extra", 7), 3.25);

  const std::string good = ReadBytes(path);
  const std::vector<size_t> starts = RecordStarts(good);
  ASSERT_EQ(starts.size(), 8u);
  // One byte flipped in the middle of the file: the record holding it fails its CRC.
  std::string flipped = good;
  const size_t middle = good.size() / 2;
  flipped[middle] = static_cast<char>(flipped[middle] ^ 0x10);
  const int damaged = static_cast<int>(
      std::upper_bound(starts.begin(), starts.end(), middle) - starts.begin() - 1);
  WriteBytes(dir + "/flipped.tfevents", flipped);
  testing::ProgramOutput out = RunReader(dir + "/flipped.tfevents");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr("record " + std::to_string(damaged) + ": "));
  EXPECT_THAT(out.text, HasSubstr("CRC mismatch"));
  // A byte of record 2's length field: its length CRC fails.
  flipped = good;
  flipped[starts[2] + 1] = static_cast<char>(flipped[starts[2] + 1] ^ 0x01);
  WriteBytes(dir + "/length.tfevents", flipped);
  out = RunReader(dir + "/length.tfevents");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr("record 2: length CRC mismatch"));
  // The last record cut short.
  WriteBytes(dir + "/truncated.tfevents", good.substr(0, good.size() - 3));
  out = RunReader(dir + "/truncated.tfevents");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr("record 7: truncated"));
  // Only part of the last record's header.
  WriteBytes(dir + "/header.tfevents", good.substr(0, starts[7] + 5));
  out = RunReader(dir + "/header.tfevents");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr("record 7: truncated"));
}

TEST(TensorBoardTest, AnUnwritableDirectoryIsAStatusNamingIt) {
  const std::string dir = FreshDir("unwritable");
  const std::string file = dir + "/a_file";
  WriteBytes(file, "not a directory");
  StatusOr<std::unique_ptr<tensorboard::EventFileWriter>> writer =
      tensorboard::EventFileWriter::Create(file + "/logs");
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(writer.status().message(), HasSubstr("'" + file + "/logs'"));
  EXPECT_THAT(writer.status().message(), HasSubstr("TensorBoard"));
  // Through the callback, Fit stops before the first step with the same error.
  Trainer trainer(0, {Dense(1)});
  trainer.Compile(SGD(0.1f));
  FitOptions fit;
  fit.verbose = 0;
  fit.callbacks = {std::make_shared<TensorBoard>(file, 1)};
  StatusOr<History> history = trainer.model->Fit(Synthetic("linreg", 32, 6).Batch(16), fit);
  ASSERT_FALSE(history.ok());
  EXPECT_THAT(history.status().message(), HasSubstr("'" + file + "/train'"));
  EXPECT_EQ(trainer.model->optimizer()->iterations(), 0);
}

// ‖Σ replicas' gradients‖₂ by hand: one device's ComputeGradients on the whole batch (a
// model with the same seed and data), in double.
double NormByHand(const data::Batch& batch, std::vector<std::shared_ptr<Layer>> layers) {
  Sequential model(std::move(layers), 7);
  TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.1f)));
  double squares = 0;
  TOWER_CHECK_OK(model.distribution()->RunOnReplicas([&](ReplicaContext& ctx) -> Status {
    TOWER_ASSIGN_OR_RETURN(Tensor x, Tensor::FromHost(ctx.device(),
                                                      Shape{batch.rows, batch.feature_dim},
                                                      batch.features));
    TOWER_ASSIGN_OR_RETURN(Tensor y, Tensor::FromHost(ctx.device(),
                                                      Shape{batch.rows, batch.target_dim},
                                                      batch.targets));
    TOWER_ASSIGN_OR_RETURN(ReplicaGradients step, model.ComputeGradients(ctx, x, y, batch.rows));
    for (const Tensor& gradient : step.gradients) {
      TOWER_ASSIGN_OR_RETURN(std::vector<float> values, gradient.ToHost());
      for (float v : values) squares += double{v} * v;
    }
    return OkStatus();
  }));
  return std::sqrt(squares);
}

// The recorded norm is the summed gradients' on every path: one device, replicas sharing
// variables (whose sums are otherwise handed to the optimizer slice by slice), replicas
// with their own copies, and under loss scaling (unscaled). Recording it changes no bit of
// training.
TEST(TensorBoardTest, TheGradientNormIsTheSummedGradientsNorm) {
  const data::Dataset dataset = Synthetic("mlp", 48, 9).Batch(48);
  const data::Batch batch = *std::move(dataset.MakeIterator().value()->Next()).value();
  const auto layers = [] {
    return std::vector<std::shared_ptr<Layer>>{Dense(16, "tanh"), Dense(4, "relu"), Dense(1)};
  };
  const double expected = NormByHand(batch, layers());
  ASSERT_GT(expected, 0);
  struct Case {
    int replicas;
    bool share;
    bool scaling;
  };
  for (const Case& c : {Case{0, true, false}, Case{2, true, false}, Case{3, false, false},
                        Case{2, true, true}}) {
    SCOPED_TRACE(std::to_string(c.replicas) + " replicas, share " + std::to_string(c.share) +
                 ", scaling " + std::to_string(c.scaling));
    std::vector<std::vector<float>> weights[2];
    for (bool record : {false, true}) {
      Trainer trainer(c.replicas, layers(), c.share);
      trainer.Compile(SGD(0.01f));
      if (c.scaling) TOWER_CHECK_OK(trainer.model->SetLossScaling(LossScaleOptions{256, 100}));
      trainer.model->set_record_gradient_norm(record);
      ASSERT_TRUE(trainer.model->TrainStep(batch).ok());
      const double norm = trainer.model->last_step_stats().gradient_global_norm;
      if (record) {
        EXPECT_NEAR(norm, expected, 1e-5 * expected);
      } else {
        EXPECT_TRUE(std::isnan(norm));
      }
      for (int step = 0; step < 3; ++step) ASSERT_TRUE(trainer.model->TrainStep(batch).ok());
      for (Variable* variable : trainer.model->trainable_variables()) {
        weights[record].push_back(*variable->value(0).ToHost());
      }
    }
    EXPECT_EQ(weights[0], weights[1]);  // bitwise
  }
}

}  // namespace
}  // namespace tower
