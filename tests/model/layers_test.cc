// Dense layers: forward against the plain formula, backward against finite differences of
// the forward pass, variable naming and build errors.
#include <cmath>
#include <cstring>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/context.h"
#include "model/activation.h"
#include "model/dense.h"
#include "ops/math_ops.h"
#include "util/logging.h"

namespace tower {
namespace {

using ::testing::HasSubstr;

Device* Cpu() { return *Context::Global().FindDevice("/CPU:0"); }

// Makes single-replica variables on CPU:0.
class TestFactory : public VariableFactory {
 public:
  StatusOr<Variable*> Create(const std::string& name, const Shape& shape,
                             const Initializer& initializer, bool trainable) override {
    TOWER_ASSIGN_OR_RETURN(Tensor value, Initialize(initializer, shape, 7, Cpu()));
    variables.push_back(std::make_unique<Variable>(name, std::vector<Tensor>{value}, trainable));
    return variables.back().get();
  }
  std::vector<std::unique_ptr<Variable>> variables;
};

std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor Host(const Shape& shape, const std::vector<float>& values) {
  return *Tensor::FromHost(Cpu(), shape, values);
}

TEST(DenseTest, NamesShapesAndDescription) {
  TestFactory factory;
  auto layer = Dense(4, "relu");
  ASSERT_TRUE(layer->Build(3, 2, factory).ok());
  ASSERT_EQ(factory.variables.size(), 2u);
  EXPECT_EQ(factory.variables[0]->name(), "layers.2.kernel");
  EXPECT_EQ(factory.variables[0]->shape(), (Shape{3, 4}));
  EXPECT_EQ(factory.variables[1]->name(), "layers.2.bias");
  EXPECT_EQ(factory.variables[1]->shape(), (Shape{4}));
  EXPECT_EQ(*factory.variables[1]->Read(), std::vector<float>(4, 0.0f));  // zeros
  EXPECT_EQ(layer->Describe(), "Dense(4, relu)");
  EXPECT_EQ(layer->output_dim(), 4);
  DenseOptions no_bias;
  no_bias.use_bias = false;
  TestFactory other;
  auto plain = Dense(2, no_bias);
  ASSERT_TRUE(plain->Build(3, 0, other).ok());
  EXPECT_EQ(plain->variables().size(), 1u);
}

TEST(DenseTest, BuildErrorsNameTheLayer) {
  TestFactory factory;
  Status bad_activation = Dense(4, "rellu")->Build(3, 1, factory);
  EXPECT_TRUE(IsInvalidArgument(bad_activation));
  EXPECT_THAT(bad_activation.message(), HasSubstr("layers.1 (Dense(4, rellu)): unknown activation 'rellu'"));
  EXPECT_THAT(Dense(0)->Build(3, 0, factory).message(), HasSubstr("units must be positive"));
  DenseOptions bad_init;
  bad_init.kernel_initializer = "orthogonal";
  EXPECT_THAT(Dense(2, bad_init)->Build(3, 0, factory).message(),
              HasSubstr("unknown initializer 'orthogonal'"));
}

TEST(DenseTest, ForwardIsActivationOfAffine) {
  for (const char* activation : {"linear", "relu", "sigmoid", "tanh", "softmax"}) {
    TestFactory factory;
    auto layer = Dense(3, activation);
    ASSERT_TRUE(layer->Build(2, 0, factory).ok());
    const std::vector<float> w = *factory.variables[0]->Read();
    ASSERT_TRUE(factory.variables[1]->Assign({0.1f, -0.2f, 0.3f}).ok());
    const std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.25f};  // 2 rows of 2
    const std::vector<float> y = *layer->Forward(0, Host(Shape{2, 2}, x), nullptr)->ToHost();
    const float b[3] = {0.1f, -0.2f, 0.3f};
    for (int i = 0; i < 2; ++i) {
      double z[3], max = -1e30, sum = 0;
      for (int j = 0; j < 3; ++j) {
        z[j] = x[i * 2] * w[j] + x[i * 2 + 1] * w[3 + j] + b[j];
        max = std::max(max, z[j]);
      }
      for (int j = 0; j < 3; ++j) sum += std::exp(z[j] - max);
      for (int j = 0; j < 3; ++j) {
        double want = z[j];
        const std::string a = activation;
        if (a == "relu") want = std::max(0.0, z[j]);
        if (a == "sigmoid") want = 1 / (1 + std::exp(-z[j]));
        if (a == "tanh") want = std::tanh(z[j]);
        if (a == "softmax") want = std::exp(z[j] - max) / sum;
        EXPECT_NEAR(y[i * 3 + j], want, 1e-6) << activation << " [" << i << "," << j << "]";
      }
    }
  }
}

// A float32 Dense layer runs its product, bias and Relu as one FusedMatMul (other
// activations after it), with the bits of MatMul, BiasAdd and the activation's op.
TEST(DenseTest, Float32ForwardFusesProductBiasAndRelu) {
  struct Expected {
    const char* activation;
    bool use_bias;
    const char* ops;  // the placement log's op names, in order
  };
  for (const Expected& e : {Expected{"relu", true, "FusedMatMul"},
                            Expected{"relu", false, "FusedMatMul"},
                            Expected{"linear", true, "FusedMatMul"},
                            Expected{"tanh", true, "FusedMatMul Tanh"}}) {
    const std::string what = std::string(e.activation) + (e.use_bias ? "" : ", no bias");
    TestFactory factory;
    DenseOptions options;
    options.activation = e.activation;
    options.use_bias = e.use_bias;
    auto layer = Dense(70, options);
    ASSERT_TRUE(layer->Build(40, 0, factory).ok());
    if (e.use_bias) ASSERT_TRUE(factory.variables[1]->Assign(Random(70, 3)).ok());
    const Tensor x = Host(Shape{33, 40}, Random(33 * 40, 4));
    std::string log;
    StatusOr<Tensor> y = InternalError("not run");
    {
      Context::Global().SetLogDevicePlacement(true);
      ScopedLogCapture capture;
      y = layer->Forward(0, x, nullptr);
      log = capture.text();
      Context::Global().SetLogDevicePlacement(false);
    }
    ASSERT_TRUE(y.ok()) << y.status();
    std::string ops;
    for (size_t at = log.find("Executing op "); at != std::string::npos;
         at = log.find("Executing op ", at + 1)) {
      const size_t name = at + std::string("Executing op ").size();
      ops += (ops.empty() ? "" : " ") + log.substr(name, log.find(' ', name) - name);
    }
    EXPECT_EQ(ops, e.ops) << what;
    StatusOr<Tensor> z = ops::MatMul(x, factory.variables[0]->value());
    if (e.use_bias && z.ok()) z = ops::BiasAdd(*z, factory.variables[1]->value());
    if (z.ok()) z = ApplyActivation(*ParseActivation(e.activation), *z);
    ASSERT_TRUE(z.ok()) << z.status();
    const std::vector<float> got = *y->ToHost();
    const std::vector<float> want = *z->ToHost();
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << what;
  }
}

// L(params) = Σ r ⊙ Dense(x): the layer's gradients for dy = r must match central
// differences of the forward pass in every kernel, bias and input element.
TEST(DenseTest, BackwardMatchesFiniteDifferences) {
  for (const char* activation : {"linear", "relu", "sigmoid", "tanh", "softmax"}) {
    TestFactory factory;
    auto layer = Dense(4, activation);
    ASSERT_TRUE(layer->Build(3, 0, factory).ok());
    ASSERT_TRUE(factory.variables[1]->Assign(Random(4, 3, 0.5f)).ok());
    const Shape x_shape{5, 3};
    std::vector<float> x = Random(15, 1);
    const std::vector<float> r = Random(20, 2);
    auto loss = [&]() {
      const std::vector<float> y = *layer->Forward(0, Host(x_shape, x), nullptr)->ToHost();
      double s = 0;
      for (size_t i = 0; i < y.size(); ++i) s += double{r[i]} * y[i];
      return s;
    };
    LayerCache cache;
    ASSERT_TRUE(layer->Forward(0, Host(x_shape, x), &cache).ok());
    std::vector<Tensor> grads;
    StatusOr<Tensor> dx = layer->Backward(0, Host(Shape{5, 4}, r), cache, true, &grads);
    ASSERT_TRUE(dx.ok()) << dx.status();
    ASSERT_EQ(grads.size(), 2u);
    auto check = [&](std::vector<float>& values, const std::function<void()>& store,
                     const std::vector<float>& analytic, const std::string& what) {
      for (size_t i = 0; i < values.size(); ++i) {
        const float saved = values[i];
        const float h = 1e-2f;
        values[i] = saved + h;
        store();
        const double plus = loss();
        values[i] = saved - h;
        store();
        const double minus = loss();
        values[i] = saved;
        store();
        EXPECT_NEAR(analytic[i], (plus - minus) / (2 * h), 2e-3)
            << activation << " " << what << "[" << i << "]";
      }
    };
    std::vector<float> kernel = *factory.variables[0]->Read();
    check(kernel, [&] { ASSERT_TRUE(factory.variables[0]->Assign(kernel).ok()); },
          *grads[0].ToHost(), "kernel");
    std::vector<float> bias = *factory.variables[1]->Read();
    check(bias, [&] { ASSERT_TRUE(factory.variables[1]->Assign(bias).ok()); },
          *grads[1].ToHost(), "bias");
    check(x, [] {}, *dx->ToHost(), "input");
  }
}

TEST(DenseTest, FirstLayerSkipsTheInputGradient) {
  TestFactory factory;
  auto layer = Dense(2);
  ASSERT_TRUE(layer->Build(3, 0, factory).ok());
  LayerCache cache;
  ASSERT_TRUE(layer->Forward(0, Host(Shape{1, 3}, {1, 2, 3}), &cache).ok());
  std::vector<Tensor> grads;
  StatusOr<Tensor> dx = layer->Backward(0, Host(Shape{1, 2}, {1, 1}), cache, false, &grads);
  ASSERT_TRUE(dx.ok());
  EXPECT_FALSE(dx->valid());
  EXPECT_EQ(grads.size(), 2u);
}

}  // namespace
}  // namespace tower
