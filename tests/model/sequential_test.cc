// The Keras-like training loop on one device: convergence on the linear regression of examples/linear_regression.cc,
// Evaluate/Predict, callbacks, progress output, weights round trips, and errors.
#include "model/sequential.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/context.h"
#include "model/callbacks.h"
#include "model/dense.h"
#include "strategy/step/distribution.h"
#include "model/normalization.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

data::Dataset Linreg(int64_t rows, int64_t batch, uint64_t seed = 1) {
  data::SyntheticOptions options;
  options.name = "linreg";
  options.rows = rows;
  options.seed = seed;
  return data::Dataset::Synthetic(options)->Batch(batch);
}

// The classic example: Dense(1), MSE, SGD(0.2) on y = 3x + 2 + noise.
std::unique_ptr<Sequential> SeedsModel(uint64_t seed = 0) {
  auto model = std::make_unique<Sequential>(std::vector<std::shared_ptr<Layer>>{Dense(1)}, seed);
  TOWER_CHECK_OK(model->Compile(MeanSquaredErrorLoss(), SGD(0.2f), {"mae"}));
  return model;
}

TEST(SequentialTest, LinearRegressionConvergesToThreeAndTwo) {
  auto model = SeedsModel();
  std::ostringstream out;
  FitOptions options;
  options.epochs = 5;
  options.out = &out;
  StatusOr<History> history = model->Fit(Linreg(2048, 32), options);
  ASSERT_TRUE(history.ok()) << history.status();
  ASSERT_EQ(history->epochs.size(), 5u);
  const std::vector<double> losses = history->values("loss");
  EXPECT_LT(losses.back(), losses.front());
  EXPECT_LT(losses.back(), 1e-3);  // the noise floor is 1e-4
  EXPECT_LT(history->values("mae").back(), 0.03);
  const std::vector<float> w = *model->trainable_variables()[0]->Read();
  const std::vector<float> b = *model->trainable_variables()[1]->Read();
  EXPECT_NEAR(w[0], 3.0f, 0.01f);
  EXPECT_NEAR(b[0], 2.0f, 0.01f);
  EXPECT_EQ(model->optimizer()->iterations(), 5 * 64);
  // Not a terminal: one finished line per epoch, no redraws.
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
  EXPECT_THAT(out.str(), HasSubstr("Epoch 5/5\n64/64 [==============================] - "));
  EXPECT_THAT(out.str(), HasSubstr(" - loss: "));
  EXPECT_THAT(out.str(), HasSubstr(" - mae: "));
}

TEST(SequentialTest, PredictAndEvaluate) {
  auto model = SeedsModel();
  FitOptions options;
  options.epochs = 3;
  options.verbose = 0;
  ASSERT_TRUE(model->Fit(Linreg(2048, 32), options).ok());
  StatusOr<std::vector<float>> y = model->Predict({0.0f, 0.5f, -1.0f}, 3);
  ASSERT_TRUE(y.ok());
  EXPECT_NEAR((*y)[0], 2.0f, 0.02f);
  EXPECT_NEAR((*y)[1], 3.5f, 0.02f);
  EXPECT_NEAR((*y)[2], -1.0f, 0.02f);
  StatusOr<Logs> logs = model->Evaluate(Linreg(512, 64, 9));
  ASSERT_TRUE(logs.ok());
  EXPECT_LT(logs->at("loss"), 1e-3);
  EXPECT_LT(logs->at("mae"), 0.03);
  EXPECT_THAT(model->Predict({1, 2}, 3).status().message(), HasSubstr("2 values are not 3 rows of 1 features"));
}

TEST(SequentialTest, SameSeedSameWeightsBitwise) {
  auto a = SeedsModel(5);
  auto b = SeedsModel(5);
  auto c = SeedsModel(6);
  FitOptions options;
  options.verbose = 0;
  ASSERT_TRUE(a->Fit(Linreg(512, 32), options).ok());
  ASSERT_TRUE(b->Fit(Linreg(512, 32), options).ok());
  ASSERT_TRUE(c->Build(1).ok());
  EXPECT_EQ(*a->trainable_variables()[0]->Read(), *b->trainable_variables()[0]->Read());
  auto fresh5 = SeedsModel(5);
  ASSERT_TRUE(fresh5->Build(1).ok());
  EXPECT_NE(*fresh5->trainable_variables()[0]->Read(), *c->trainable_variables()[0]->Read());
}

TEST(SequentialTest, MlpWithAdamAndValidation) {
  data::SyntheticOptions options;
  options.name = "mlp";
  options.rows = 4096;
  auto train = data::Dataset::Synthetic(options)->Batch(64);
  options.seed = 99;
  options.rows = 256;
  auto validation = data::Dataset::Synthetic(options)->Batch(64);
  Sequential model({Dense(16, "relu"), Dense(1)}, 3);
  ASSERT_TRUE(model.Compile(MeanSquaredErrorLoss(), Adam(0.01f)).ok());
  FitOptions fit;
  fit.epochs = 4;
  fit.verbose = 0;
  fit.validation = &validation;
  StatusOr<History> history = model.Fit(train, fit);
  ASSERT_TRUE(history.ok()) << history.status();
  const std::vector<double> val = history->values("val_loss");
  EXPECT_LT(val.back(), 0.5 * val.front());
  EXPECT_EQ(model.optimizer()->slots().size(), 8u);  // m and v of 4 variables
}

TEST(SequentialTest, ClassifierWithCrossEntropyAndAccuracy) {
  // Three separable classes on a line: x < -0.33, |x| < 0.33, x > 0.33.
  std::vector<float> x, y;
  for (int i = 0; i < 600; ++i) {
    const float v = -1.0f + 2.0f * i / 599;
    x.push_back(v);
    y.push_back(v < -0.33f ? 0.0f : (v < 0.33f ? 1.0f : 2.0f));
  }
  auto dataset = data::Dataset::FromTensors(x, 1, y, 1)->Shuffle(600, 4).Batch(30);
  Sequential model({Dense(16, "tanh"), Dense(3)}, 1);
  ASSERT_TRUE(model.Compile(SparseCategoricalCrossentropyLoss(), Adam(0.05f), {"accuracy"}).ok());
  FitOptions options;
  options.epochs = 20;
  options.verbose = 0;
  StatusOr<History> history = model.Fit(dataset, options);
  ASSERT_TRUE(history.ok()) << history.status();
  EXPECT_GT(history->values("accuracy").back(), 0.95);
}

TEST(SequentialTest, CallbacksLogCheckpointAndStop) {
  const std::string csv = TempPath("log.csv");
  const std::string jsonl = TempPath("log.jsonl");
  const std::string checkpoint = TempPath("ckpt-{epoch}.safetensors");
  auto model = SeedsModel();
  auto early = std::make_shared<EarlyStopping>("loss", /*patience=*/0, /*min_delta=*/10.0);
  FitOptions options;
  options.epochs = 10;
  options.verbose = 0;
  options.callbacks = {std::make_shared<CsvLogger>(csv), std::make_shared<JsonLinesLogger>(jsonl, true),
                       std::make_shared<ModelCheckpoint>(checkpoint, 0, 1), early};
  StatusOr<History> history = model->Fit(Linreg(256, 32), options);
  ASSERT_TRUE(history.ok()) << history.status();
  // min_delta 10 means no epoch ever "improves" enough after the first: stop after epoch 2.
  EXPECT_EQ(history->epochs.size(), 2u);
  EXPECT_EQ(early->stopped_epoch(), 1);
  const std::string csv_text = ReadFile(csv);
  EXPECT_THAT(csv_text, StartsWith("epoch,loss,mae\n0,"));
  EXPECT_EQ(std::count(csv_text.begin(), csv_text.end(), '\n'), 3);
  const std::string json_text = ReadFile(jsonl);
  EXPECT_THAT(json_text, HasSubstr("{\"step\": 1, \"loss\": "));
  EXPECT_THAT(json_text, HasSubstr("{\"epoch\": 1, \"loss\": "));
  EXPECT_EQ(std::count(json_text.begin(), json_text.end(), '\n'), 16 + 2);
  // One checkpoint per epoch, loadable into a fresh model.
  auto fresh = SeedsModel();
  ASSERT_TRUE(fresh->LoadWeights(TempPath("ckpt-2.safetensors")).ok());
  EXPECT_EQ(*fresh->trainable_variables()[0]->Read(), *model->trainable_variables()[0]->Read());
  EXPECT_EQ(fresh->optimizer()->iterations(), 16);
  EarlyStopping wrong("val_loss");
  ASSERT_TRUE(wrong.OnTrainBegin(*model).ok());
  EXPECT_THAT(wrong.OnEpochEnd(*model, 0, {{"loss", 1}}).message(),
              HasSubstr("monitors 'val_loss', which the logs do not have (they have: loss)"));
}

TEST(SequentialTest, WeightsRoundTripWithOptimizerState) {
  const std::string path = TempPath("weights.safetensors");
  Sequential model({Dense(4, "relu"), Dense(1)}, 7);
  ASSERT_TRUE(model.Compile(MeanSquaredErrorLoss(), SGD(0.05f, 0.9f)).ok());
  FitOptions options;
  options.verbose = 0;
  ASSERT_TRUE(model.Fit(Linreg(128, 16), options).ok());
  ASSERT_TRUE(model.SaveWeights(path).ok());
  Sequential restored({Dense(4, "relu"), Dense(1)}, 123);
  ASSERT_TRUE(restored.Compile(MeanSquaredErrorLoss(), SGD(0.05f, 0.9f)).ok());
  ASSERT_TRUE(restored.LoadWeights(path).ok());  // builds from the file
  EXPECT_EQ(restored.optimizer()->iterations(), 8);
  for (size_t i = 0; i < model.trainable_variables().size(); ++i) {
    EXPECT_EQ(*restored.trainable_variables()[i]->Read(), *model.trainable_variables()[i]->Read());
  }
  for (size_t i = 0; i < model.optimizer()->slots().size(); ++i) {
    EXPECT_EQ(*restored.optimizer()->slots()[i]->Read(), *model.optimizer()->slots()[i]->Read());
  }
  // Continuing both gives the same weights: the state is complete.
  ASSERT_TRUE(model.Fit(Linreg(64, 16, 3), options).ok());
  ASSERT_TRUE(restored.Fit(Linreg(64, 16, 3), options).ok());
  EXPECT_EQ(*restored.trainable_variables()[0]->Read(), *model.trainable_variables()[0]->Read());
}

TEST(SequentialTest, LoadingChecksNamesShapesAndDtypes) {
  const std::string path = TempPath("small.safetensors");
  Sequential small({Dense(4), Dense(1)});
  ASSERT_TRUE(small.Compile(MeanSquaredErrorLoss(), SGD()).ok());
  ASSERT_TRUE(small.Build(3).ok());
  ASSERT_TRUE(small.SaveWeights(path).ok());
  Sequential wider({Dense(5), Dense(1)});
  ASSERT_TRUE(wider.Compile(MeanSquaredErrorLoss(), SGD()).ok());
  ASSERT_TRUE(wider.Build(3).ok());
  const std::vector<float> before = *wider.trainable_variables()[0]->Read();
  Status shape = wider.LoadWeights(path);
  EXPECT_THAT(shape.message(), HasSubstr("tensor 'layers.0.kernel' has shape [3, 4] but the model's is [3, 5]"));
  EXPECT_EQ(*wider.trainable_variables()[0]->Read(), before);  // untouched
  Sequential deeper({Dense(4), Dense(1), Dense(1)});
  ASSERT_TRUE(deeper.Compile(MeanSquaredErrorLoss(), SGD()).ok());
  ASSERT_TRUE(deeper.Build(3).ok());
  EXPECT_THAT(deeper.LoadWeights(path).message(), HasSubstr("has no tensor 'layers.2.kernel'"));
  Sequential shallow({Dense(4)});
  ASSERT_TRUE(shallow.Compile(MeanSquaredErrorLoss(), SGD()).ok());
  EXPECT_THAT(shallow.LoadWeights(path).message(), HasSubstr("tensor 'layers.1.kernel' is not part of this model"));
  EXPECT_TRUE(IsNotFound(shallow.LoadWeights(TempPath("absent.safetensors"))));
}

TEST(SequentialTest, ErrorsAreClear) {
  Sequential model({Dense(1)});
  EXPECT_THAT(model.Fit(Linreg(64, 32)).status().message(), HasSubstr("not compiled"));
  ASSERT_TRUE(model.Compile(MeanSquaredErrorLoss(), SGD()).ok());
  data::SyntheticOptions infinite;
  infinite.name = "linreg";
  EXPECT_THAT(model.Fit(data::Dataset::Synthetic(infinite)->Batch(8)).status().message(),
              HasSubstr("infinite; set steps_per_epoch"));
  ASSERT_TRUE(model.Build(1).ok());
  data::SyntheticOptions mlp;
  mlp.name = "mlp";
  mlp.rows = 8;
  EXPECT_THAT(model.Fit(data::Dataset::Synthetic(mlp)->Batch(8), {}).status().message(),
              HasSubstr("the batch has 256 features per row, the model takes 1"));
  Sequential empty({});
  EXPECT_THAT(empty.Compile(MeanSquaredErrorLoss(), SGD()).message(), HasSubstr("no layers"));
  Sequential bad({Dense(3, "swish")});
  ASSERT_TRUE(bad.Compile(MeanSquaredErrorLoss(), SGD()).ok());
  EXPECT_THAT(bad.Build(2).message(), HasSubstr("unknown activation 'swish'"));
  FitOptions zero;
  zero.epochs = 0;
  EXPECT_FALSE(model.Fit(Linreg(64, 32), zero).ok());
}

TEST(SequentialTest, StepsPerEpochAndMaxSteps) {
  auto model = SeedsModel();
  data::SyntheticOptions infinite;
  infinite.name = "linreg";
  FitOptions options;
  options.epochs = 3;
  options.steps_per_epoch = 10;
  options.verbose = 0;
  ASSERT_TRUE(model->Fit(data::Dataset::Synthetic(infinite)->Batch(16), options).ok());
  EXPECT_EQ(model->optimizer()->iterations(), 30);
  FitOptions capped;
  capped.epochs = 100;
  capped.max_steps = 7;
  capped.verbose = 0;
  StatusOr<History> history = model->Fit(Linreg(64, 16), capped);  // 4 steps per epoch
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(model->optimizer()->iterations(), 37);
  EXPECT_EQ(history->epochs.size(), 2u);
}

TEST(SequentialTest, SummaryListsLayersAndParameters) {
  Sequential model({Dense(64, "relu"), Dense(1)});
  ASSERT_TRUE(model.Compile(MeanSquaredErrorLoss(), SGD()).ok());
  ASSERT_TRUE(model.Build(256).ok());
  const std::string summary = model.Summary();
  EXPECT_THAT(summary, HasSubstr("layers.0 (Dense(64, relu))"));
  EXPECT_THAT(summary, HasSubstr("16448"));  // 256·64 + 64
  EXPECT_THAT(summary, HasSubstr("Total params: 16513"));
}

// One device, but records what the training step hands to the collectives.
class RecordingDistribution : public Distribution {
 public:
  explicit RecordingDistribution(Device* device) : device_(device), replica_(this) {}
  std::string Describe() const override { return "Recording"; }
  int num_local_replicas() const override { return 1; }
  int num_replicas_in_sync() const override { return 1; }
  int first_global_replica() const override { return 0; }
  Device* replica_device(int) const override { return device_; }
  bool is_chief() const override { return true; }
  Status RunOnReplicas(const std::function<Status(ReplicaContext&)>& fn) override {
    return fn(replica_);
  }
  // One entry per call: "begin:<bytes,...>", "add:<bytes>", "finish:<bytes,...>",
  // "reduce:<bytes,...>", "broadcast:<n>".
  std::vector<std::string> calls;

 private:
  static std::string Bytes(Span<Tensor* const> tensors) {
    std::string text;
    for (size_t i = 0; i < tensors.size(); ++i) {
      text += (i ? "," : "") + std::to_string(tensors[i]->bytes());
    }
    return text;
  }
  class Reducer : public GradientReducer {
   public:
    explicit Reducer(RecordingDistribution* owner) : owner_(owner) {}
    Status Begin(Span<const int64_t> bytes, int, int) override {
      std::string call = "begin:";
      for (size_t i = 0; i < bytes.size(); ++i) call += (i ? "," : "") + std::to_string(bytes[i]);
      owner_->calls.push_back(call);
      return OkStatus();
    }
    Status Add(Tensor* gradient) override {
      owner_->calls.push_back("add:" + std::to_string(gradient->bytes()));
      return OkStatus();
    }
    Status Finish(Span<Tensor* const> extra) override {
      owner_->calls.push_back("finish:" + Bytes(extra));
      return OkStatus();
    }

   private:
    RecordingDistribution* owner_;
  };
  class Context : public ReplicaContext {
   public:
    explicit Context(RecordingDistribution* owner) : owner_(owner), reducer_(owner) {}
    int replica_id() const override { return 0; }
    int num_replicas_in_sync() const override { return 1; }
    int global_replica_id() const override { return 0; }
    Device* device() const override { return owner_->device_; }
    Status AllReduceSum(Span<Tensor* const> tensors) override {
      owner_->calls.push_back("reduce:" + Bytes(tensors));
      return OkStatus();
    }
    Status Broadcast(Span<Tensor* const> tensors) override {
      owner_->calls.push_back("broadcast:" + std::to_string(tensors.size()));
      return OkStatus();
    }
    GradientReducer& gradient_reducer() override { return reducer_; }

   private:
    RecordingDistribution* owner_;
    Reducer reducer_;
  };
  Device* device_;
  Context replica_;
};

// A layer that records when its backward pass runs, into the distribution's call list, so
// that the order of backward passes and reducer calls can be checked.
class RecordingLayer : public Layer {
 public:
  RecordingLayer(std::shared_ptr<Layer> inner, std::vector<std::string>* calls)
      : inner_(std::move(inner)), calls_(calls) {}
  std::string Describe() const override { return inner_->Describe(); }
  Status Build(int64_t input_dim, int index, VariableFactory& factory) override {
    index_ = index;
    return inner_->Build(input_dim, index, factory);
  }
  int64_t output_dim() const override { return inner_->output_dim(); }
  std::vector<Variable*> variables() const override { return inner_->variables(); }
  StatusOr<Tensor> Forward(int replica, const Tensor& x, LayerCache* cache) override {
    return inner_->Forward(replica, x, cache);
  }
  StatusOr<Tensor> Backward(int replica, const Tensor& dy, const LayerCache& cache,
                            bool need_input_grad, std::vector<Tensor>* grads) override {
    calls_->push_back("backward:" + std::to_string(index_));
    return inner_->Backward(replica, dy, cache, need_input_grad, grads);
  }

 private:
  std::shared_ptr<Layer> inner_;
  std::vector<std::string>* calls_;
  int index_ = -1;
};

// The model hands each gradient to the distribution's reducer as soon as backward produces
// it, last layer first (before the next layer's backward runs), after announcing their
// sizes; the loss comes with Finish. (How they are bucketed, and that a full bucket is summed
// on the spot, is the strategy's: tests/strategy/gradient_reducer_test.cc.)
TEST(SequentialTest, GradientsGoToTheReducerAsBackwardProducesThem) {
  Device* cpu = *tower::Context::Default().DefaultDevice();
  data::SyntheticOptions mlp;
  mlp.name = "mlp";
  mlp.rows = 8;
  const data::Dataset dataset = data::Dataset::Synthetic(mlp)->Batch(8);
  RecordingDistribution distribution(cpu);
  std::vector<std::shared_ptr<Layer>> layers;
  for (auto layer : {Dense(32, "tanh"), Dense(16, "relu"), Dense(1)}) {
    layers.push_back(std::make_shared<RecordingLayer>(layer, &distribution.calls));
  }
  Sequential model(layers, 3);
  {
    DistributionScope scope(distribution);
    ASSERT_TRUE(model.Compile(MeanSquaredErrorLoss(), SGD(0.01f)).ok());
  }
  ASSERT_TRUE(model.Build(256).ok());
  distribution.calls.clear();
  auto batch = (*dataset.MakeIterator())->Next();
  ASSERT_TRUE(batch.ok() && *batch);
  ASSERT_TRUE(model.TrainStep(**batch).ok());
  // Gradient bytes (kernel, bias), last layer first: 16·1·4 and 4; 32·16·4 and 16·4;
  // 256·32·4 and 32·4. The loss (4 bytes) comes with Finish.
  const std::vector<std::string> expected = {
      "begin:64,4,2048,64,32768,128",
      "backward:2", "add:64", "add:4",
      "backward:1", "add:2048", "add:64",
      "backward:0", "add:32768", "add:128",
      "finish:4"};
  EXPECT_EQ(distribution.calls, expected);
  // Evaluation sums only the loss, through the reducer (a pass without gradients).
  distribution.calls.clear();
  ASSERT_TRUE(model.Evaluate(dataset).ok());
  EXPECT_EQ(distribution.calls, std::vector<std::string>({"begin:", "finish:4"}));
}

TEST(SequentialTest, CheckNumericsNamesTheFirstNonFiniteLossOrGradient) {
  // x = 1e30, kernel 1e-20: the prediction is 1e10 and the loss 1e20 (finite), but the
  // kernel's gradient 2·x·(pred − y) = 2e40 overflows float.
  auto model = SeedsModel();
  ASSERT_TRUE(model->Build(1).ok());
  ASSERT_TRUE(model->trainable_variables()[0]->Assign({1e-20f}).ok());
  const data::Dataset huge = *data::Dataset::FromTensors({1e30f}, 1, {0.0f}, 1);
  FitOptions options;
  options.verbose = 0;
  // Off (the default): training goes on with Inf.
  EXPECT_TRUE(model->Fit(huge.Batch(1), options).ok());
  model = SeedsModel();
  ASSERT_TRUE(model->Build(1).ok());
  ASSERT_TRUE(model->trainable_variables()[0]->Assign({1e-20f}).ok());
  model->set_check_numerics(true);
  StatusOr<History> history = model->Fit(huge.Batch(1), options);
  ASSERT_FALSE(history.ok());
  EXPECT_THAT(history.status().message(),
              HasSubstr("check-numerics: global step 1: the gradient of layers.0.kernel (layer "
                        "Dense(1)) has Inf at element 0 of [1, 1]"));
  EXPECT_THAT(history.status().message(), HasSubstr("epoch 1, step 1"));
  EXPECT_EQ(*model->trainable_variables()[0]->Read(), std::vector<float>{1e-20f})
      << "the step that failed must not update the weights";
  // A NaN in the data: the loss is the first non-finite tensor.
  const data::Dataset nan = *data::Dataset::FromTensors({0.5f, NAN}, 1, {1.0f, 2.0f}, 1);
  model = SeedsModel();
  model->set_check_numerics(true);
  history = model->Fit(nan.Batch(1), options);
  ASSERT_FALSE(history.ok());
  EXPECT_THAT(history.status().message(),
              HasSubstr("check-numerics: global step 2: the loss has NaN"));
}

// A diverging run (x = 1e30 overflows the loss in the second step) stops with an error
// that says what to do, by default; terminate_on_nan = false trains on (Keras without
// TerminateOnNaN).
TEST(SequentialTest, ADivergingRunStopsByDefault) {
  const data::Dataset huge = *data::Dataset::FromTensors({1e18f, 1e18f, 1e18f}, 1,
                                                         {0.0f, 0.0f, 0.0f}, 1);
  FitOptions options;
  options.verbose = 0;
  auto model = SeedsModel();
  StatusOr<History> history = model->Fit(huge.Batch(1), options);
  ASSERT_FALSE(history.ok());
  EXPECT_TRUE(IsInvalidArgument(history.status())) << history.status();
  EXPECT_THAT(history.status().message(), HasSubstr("training diverged: the loss is"));
  EXPECT_THAT(history.status().message(), HasSubstr("lower the learning rate"));
  options.terminate_on_nan = false;
  model = SeedsModel();
  history = model->Fit(huge.Batch(1), options);
  ASSERT_TRUE(history.ok()) << history.status();
  EXPECT_FALSE(std::isfinite(history->epochs.back().at("loss")));
}

// Normalization: adapt computes each feature's mean and population std (a constant feature
// is only centred), forward applies (x − mean) / std, and the statistics travel with the
// weights.
TEST(SequentialTest, NormalizationAdaptsAppliesAndIsSaved) {
  const data::Dataset rows = *data::Dataset::FromTensors(
      {1, 10, -1, 2, 10, 1, 3, 10, -1, 4, 10, 1}, 3, {0, 0, 0, 0}, 1);
  auto make = [] {
    auto model = std::make_unique<Sequential>(
        std::vector<std::shared_ptr<Layer>>{Normalization(), Dense(1)}, 1);
    TOWER_CHECK_OK(model->Compile(MeanSquaredErrorLoss(), SGD(0.1f)));
    TOWER_CHECK_OK(model->Build(3));
    return model;
  };
  auto model = make();
  auto& norm = static_cast<NormalizationLayer&>(*model->layers()[0]);
  EXPECT_THAT(*norm.Mean(), ::testing::ElementsAre(0, 0, 0));  // the identity until adapted
  ASSERT_TRUE(norm.Adapt(rows).ok());
  const float std0 = std::sqrt(1.25f);  // of 1, 2, 3, 4
  EXPECT_THAT(*norm.Mean(), ::testing::Pointwise(::testing::FloatNear(1e-6f), {2.5f, 10.0f, 0.0f}));
  EXPECT_THAT(*norm.Std(), ::testing::Pointwise(::testing::FloatNear(1e-6f), {std0, 1.0f, 1.0f}));
  Device* cpu = *tower::Context::Default().DefaultDevice();
  const Tensor x = *Tensor::FromHost(cpu, Shape{2, 3}, {1, 10, -1, 4, 10, 1});
  const std::vector<float> y = *(*norm.Forward(0, x, nullptr)).ToHost();
  EXPECT_THAT(y, ::testing::Pointwise(::testing::FloatNear(1e-6f),
                                      {-1.5f / std0, 0.0f, -1.0f, 1.5f / std0, 0.0f, 1.0f}));
  EXPECT_TRUE(model->trainable_variables().size() == 2) << "only the dense layer trains";
  // Saved and loaded with the weights.
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/normalized.safetensors";
  ASSERT_TRUE(model->SaveWeights(path).ok());
  auto loaded = make();
  ASSERT_TRUE(loaded->LoadWeights(path, /*with_optimizer_state=*/false).ok());
  EXPECT_EQ(*static_cast<NormalizationLayer&>(*loaded->layers()[0]).Mean(), *norm.Mean());
  // Training leaves the statistics alone.
  ASSERT_TRUE(model->Fit(rows.Batch(2), FitOptions{.verbose = 0}).ok());
  EXPECT_THAT(*norm.Mean(), ::testing::Pointwise(::testing::FloatNear(1e-6f), {2.5f, 10.0f, 0.0f}));
}

TEST(SequentialTest, FitPositionRoundTripsThroughMetadataExactly) {
  FitPosition position;
  position.epoch = 3;
  position.step_in_epoch = 17;
  position.total_steps = 1234567890123;
  position.loss_sum = 0.1 + 0.2;  // not representable in a short decimal
  position.rows = 99;
  position.metrics = {{1.0 / 3.0, 7}, {42, 64}};
  position.signature = "data=x.csv layers=8:relu,1";
  std::map<std::string, std::string> metadata;
  AddToMetadata(position, &metadata);
  StatusOr<FitPosition> back = FitPositionFromMetadata(metadata, "b.safetensors");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == position);
  EXPECT_EQ(FitPositionFromMetadata({}, "w.safetensors").status().code(), StatusCode::kNotFound);
  for (const std::string key : {"fit.step_in_epoch", "fit.loss_sum", "fit.metrics"}) {
    auto broken = metadata;
    broken[key] = "x/y";
    EXPECT_THAT(FitPositionFromMetadata(broken, "b.safetensors").status().message(),
                HasSubstr("b.safetensors: metadata '" + key + "' is missing or malformed"));
  }
}

TEST(SequentialTest, BackupAndResumeContinueExactlyWhereTheRunStopped) {
  // Shuffled data and momentum: the data position and the optimizer state both matter.
  data::SyntheticOptions linreg;
  linreg.name = "linreg";
  linreg.rows = 300;
  const data::Dataset dataset = data::Dataset::Synthetic(linreg)->Shuffle(300, 4).Batch(32);
  auto make = [] {
    auto model = std::make_unique<Sequential>(
        std::vector<std::shared_ptr<Layer>>{Dense(4, "tanh"), Dense(1)}, 5);
    TOWER_CHECK_OK(model->Compile(MeanSquaredErrorLoss(), SGD(0.05f, 0.9f), {"mae"}));
    return model;
  };
  FitOptions options;
  options.epochs = 3;
  options.verbose = 0;
  auto whole = make();
  StatusOr<History> expected = whole->Fit(dataset, options);
  ASSERT_TRUE(expected.ok());

  const std::string backup = TempPath("fit_backup.safetensors");
  FitOptions first = options;
  first.max_steps = 14;  // stops mid-epoch 2 (10 steps per epoch)
  first.backup_path = backup;
  first.backup_every_steps = 4;
  first.signature = "test";
  ASSERT_TRUE(make()->Fit(dataset, first).ok());
  auto resumed = make();
  StatusOr<FitPosition> position = resumed->RestoreBackup(backup, "test");
  ASSERT_TRUE(position.ok()) << position.status();
  EXPECT_EQ(position->epoch, 1);
  EXPECT_EQ(position->step_in_epoch, 4);
  EXPECT_EQ(position->total_steps, 14);
  EXPECT_FALSE(resumed->RestoreBackup(backup, "another run").ok());
  // A position the data cannot reach (the data changed) and one for other metrics: refused.
  FitOptions beyond = options;
  beyond.resume = *position;
  beyond.resume->step_in_epoch = 50;
  EXPECT_THAT(make()->Fit(dataset, beyond).status().message(),
              HasSubstr("the data ended after 10 batches of epoch 2, before the resume "
                        "position (step 50)"));
  FitOptions other_metrics = options;
  other_metrics.resume = *position;
  other_metrics.resume->metrics.clear();
  EXPECT_THAT(make()->Fit(dataset, other_metrics).status().message(),
              HasSubstr("the resume position has 0 metric totals for 1 metrics"));
  FitOptions rest = options;
  rest.resume = *position;
  StatusOr<History> history = resumed->Fit(dataset, rest);
  ASSERT_TRUE(history.ok()) << history.status();
  for (size_t v = 0; v < whole->trainable_variables().size(); ++v) {
    EXPECT_EQ(*resumed->trainable_variables()[v]->Read(), *whole->trainable_variables()[v]->Read());
  }
  EXPECT_EQ(resumed->optimizer()->iterations(), 30);
  // The interrupted epoch's figures include the steps before the restart.
  ASSERT_EQ(history->epochs.size(), 2u);
  EXPECT_EQ(history->epochs[0].at("loss"), expected->epochs[1].at("loss"));
  EXPECT_EQ(history->epochs[0].at("mae"), expected->epochs[1].at("mae"));
}

}  // namespace
}  // namespace tower
