// Every op's CUDA kernel, run on GPU:0 through the public ops API, against the plain
// reference (ops/reference) on odd shapes, an empty batch and large values; the random ops
// and AddN bitwise against the reference and the CPU kernels. Each test prints
//   max abs error <op>: <value>
// for the ops it checks, so that a GPU run can be reported. Tolerances are stated per op
// (error bounds of the usual forms: k·ε·Σ|a||b| for a product of inner size k).
//
// Built only with --config=cuda; the tests that need a GPU skip on machines without one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "device/context.h"
#include "device/placement.h"
#include "ops/array_ops.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/eager.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/op_names.h"
#include "ops/random_ops.h"
#include "ops/reference/reference_ops.h"
#include "ops/training_ops.h"
#include "tests/testing/gpu.h"
#include "tests/testing/same_bits.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using Values = std::vector<float>;

constexpr float kEps = 1.1920929e-07f;  // float32 machine epsilon

// Uniform in [-scale, scale): the top 24 bits of each draw as a fraction. Not
// std::uniform_real_distribution, whose libstdc++ generate_canonical takes a long-double
// log per value: that was a third of this test's time, 20 times over in CI's shaken run.
Values RandomValues(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  Values v(static_cast<size_t>(n));
  for (float& x : v) x = scale * (static_cast<float>(rng() >> 8) * 0x1p-23f - 1.0f);
  return v;
}

Values Abs(Values v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

using testing::SameBits;

struct Case {
  int64_t rows;
  int64_t cols;
  float scale;  // inputs uniform in [−scale, scale]
};

std::string Name(const Case& c) {
  return "[" + std::to_string(c.rows) + ", " + std::to_string(c.cols) + "] x" +
         std::to_string(static_cast<int>(c.scale));
}

// Odd shapes, a single element, an empty batch, rows of no columns, large values, and sizes
// that need several blocks (and several partial sums in the reductions).
const Case kCases[] = {{1, 1, 1}, {7, 13, 1},     {33, 65, 2},  {257, 129, 1}, {0, 5, 1},
                       {5, 0, 1}, {16, 16, 1000}, {4099, 3, 1}, {1, 70001, 1}, {20000, 40, 1}};

// Every op but the CPU-only ones has a CUDA kernel (needs no GPU: it asks the registry).
TEST(GpuKernelRegistrationTest, EveryOpButTheCpuOnlyOnesHasACudaKernel) {
  for (const cpu::NamedKernel& kernel : cpu::AllKernels()) {
    const std::string kernels = KernelsOf(kernel.op).DescribeKernels();
    if (op_names::IsCpuOnly(kernel.op)) {
      EXPECT_EQ(kernels, "CPU (Host)") << kernel.op;
    } else {
      EXPECT_THAT(kernels, HasSubstr("GPU (CUDA)")) << kernel.op;
    }
  }
}

class OpsGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Context::Global().ListPhysicalDevices("GPU").empty()) {
      TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
    }
    StatusOr<Device*> gpu = Context::Global().FindDevice("/GPU:0");
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = *gpu;
    StatusOr<Device*> cpu = Context::Global().FindDevice("/CPU:0");
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = *cpu;
  }

  void TearDown() override {
    for (const auto& [op, error] : max_error_) {
      std::cout << "max abs error " << op << ": " << error << std::endl;
    }
  }

  Tensor Make(const Shape& shape, const Values& values, Device* device = nullptr) {
    StatusOr<Tensor> t = Tensor::FromHost(device != nullptr ? device : gpu_, shape, values);
    TOWER_CHECK_OK(t.status());
    return *t;
  }

  Tensor MakeLabels(const std::vector<int32_t>& labels) {
    StatusOr<Tensor> t =
        Tensor::FromHostInt32(gpu_, Shape{static_cast<int64_t>(labels.size())}, labels);
    TOWER_CHECK_OK(t.status());
    return *t;
  }

  // The values of an op's result, which must have been computed on the GPU.
  Values Host(const StatusOr<Tensor>& t) {
    if (!t.ok()) {
      ADD_FAILURE() << t.status();
      return {};
    }
    EXPECT_EQ(t->device(), gpu_) << "ran on " << t->device()->full_name();
    StatusOr<Values> values = t->ToHost();
    if (!values.ok()) {
      ADD_FAILURE() << values.status();
      return {};
    }
    return *values;
  }

  // |got − want| <= bound per element, reporting the worst excess; records the op's largest
  // absolute error for the summary line.
  void ExpectWithin(const std::string& op, const Values& got, const Values& want,
                    const Values& bound, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double& max_error = max_error_[op];
    double worst = 0;
    size_t worst_index = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
        continue;
      }
      const double error = std::fabs(double{got[i]} - want[i]);
      if (!(error <= max_error)) max_error = error;  // NaN sticks
      const double excess = error - bound[i];
      if (!(excess <= worst)) {
        worst = excess;
        worst_index = i;
      }
    }
    EXPECT_EQ(worst, 0) << what << ": element " << worst_index << " is " << got[worst_index]
                        << ", reference " << want[worst_index] << ", allowed error "
                        << bound[worst_index];
  }

  // Relative tolerance: bound = tol · max(1, |want|).
  void ExpectClose(const std::string& op, const Values& got, const Values& want, float tol,
                   const std::string& what) {
    Values bound(want.size());
    for (size_t i = 0; i < want.size(); ++i) bound[i] = tol * std::max(1.0f, std::fabs(want[i]));
    ExpectWithin(op, got, want, bound, what);
  }

  // Bitwise equality, recorded as an error of 0 (or the largest difference when not equal).
  void ExpectBitwise(const std::string& op, const Values& got, const Values& want,
                     const std::string& what) {
    ExpectWithin(op, got, want, Values(want.size(), 0.0f), what);
    EXPECT_TRUE(SameBits(got, want)) << what;
  }

  Device* gpu_ = nullptr;
  Device* cpu_ = nullptr;
  std::map<std::string, double> max_error_;
};

// MatMul, and MatMulAddInto over the same operands.
TEST_F(OpsGpuTest, MatMulAllTransposes) {
  std::vector<Case> cases(std::begin(kCases), std::end(kCases));
  cases.push_back({300, 1000, 1});  // a long inner dimension
  for (const Case& c : cases) {
    const int64_t m = c.rows, k = c.cols, n = 11;
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        const Shape a_shape = ta ? Shape{k, m} : Shape{m, k};
        const Shape b_shape = tb ? Shape{n, k} : Shape{k, n};
        const Values a = RandomValues(m * k, c.scale, 1);
        const Values b = RandomValues(k * n, c.scale, 2);
        const std::string what = Name(c) + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
        const Values got = Host(ops::MatMul(Make(a_shape, a), Make(b_shape, b), ta, tb));
        const Values want = reference::MatMul(a, a_shape, b, b_shape, ta, tb);
        // A float dot product of length k, in any order: k·ε·Σ|a||b| (plus headroom). cuBLAS
        // runs in true FP32 (CUBLAS_DEFAULT_MATH): TF32 would exceed this by ~1000×.
        const Values magnitude = reference::MatMul(Abs(a), a_shape, Abs(b), b_shape, ta, tb);
        Values bound = magnitude;
        for (float& x : bound) x *= 2 * (k + 1) * kEps;
        ExpectWithin("MatMul", got, want, bound, "MatMul " + what);
        // MatMulAddInto (cuBLAS with beta = 1): the reference product plus the sum's old values;
        // an empty inner dimension leaves the sum as it was.
        const Values before = RandomValues(m * n, c.scale * c.scale, 3);
        Tensor sum = Make(Shape{m, n}, before);
        ASSERT_TRUE(ops::MatMulAddInto(Make(a_shape, a), Make(b_shape, b), ta, tb, sum).ok());
        Values want_added = want;
        Values bound_added = magnitude;
        for (size_t i = 0; i < want.size(); ++i) {
          want_added[i] += before[i];
          bound_added[i] = (bound_added[i] + std::fabs(before[i])) * 2 * (k + 2) * kEps;
        }
        ExpectWithin("MatMulAdd", *sum.ToHost(), want_added, bound_added, "MatMulAddInto " + what);
      }
    }
  }
  // The placement guide's example, and an empty inner dimension (k = 0) gives zeros.
  EXPECT_EQ(Host(ops::MatMul(Make(Shape{2, 3}, {1, 2, 3, 4, 5, 6}),
                             Make(Shape{3, 2}, {1, 2, 3, 4, 5, 6}))),
            (Values{22, 28, 49, 64}));
  EXPECT_EQ(Host(ops::MatMul(Make(Shape{2, 0}, {}), Make(Shape{0, 3}, {}))), Values(6, 0.0f));
}

// FusedMatMul: cuBLAS's product, then the bias and Relu kernels in place on it: the bits of
// MatMul, BiasAdd and Relu on this device, and within the product's bound of the reference.
TEST_F(OpsGpuTest, FusedMatMulIsMatMulBiasAddAndRelu) {
  for (const Case& c : kCases) {
    const int64_t m = c.rows, k = c.cols, n = 11;
    const Values x = RandomValues(m * k, c.scale, 7);
    const Values w = RandomValues(k * n, c.scale, 8);  // as stored, [k, n] or [n, k]
    const Values bias = RandomValues(n, c.scale, 9);
    for (int tw = 0; tw < 2; ++tw) {
      const Shape w_shape = tw ? Shape{n, k} : Shape{k, n};
      for (bool has_bias : {false, true}) {
        for (bool relu : {false, true}) {
          const std::string what = Name(c) + " tw=" + std::to_string(tw) +
                                   (has_bias ? " bias" : "") + (relu ? " relu" : "");
          const Tensor tx = Make(Shape{m, k}, x), tw_ = Make(w_shape, w);
          const Tensor tbias = has_bias ? Make(Shape{n}, bias) : Tensor();
          const Values got = Host(ops::FusedMatMul(
              tx, tw_, tbias, relu ? ops::FusedActivation::kRelu : ops::FusedActivation::kNone,
              tw));
          StatusOr<Tensor> z = ops::MatMul(tx, tw_, false, tw);
          if (has_bias && z.ok()) z = ops::BiasAdd(*z, tbias);
          if (relu && z.ok()) z = ops::Relu(*z);
          EXPECT_TRUE(SameBits(got, Host(z))) << what;
          Values want = reference::MatMul(x, Shape{m, k}, w, w_shape, false, tw);
          Values bound = reference::MatMul(Abs(x), Shape{m, k}, Abs(w), w_shape, false, tw);
          if (has_bias) {
            want = reference::BiasAdd(want, Shape{m, n}, bias);
            bound = reference::BiasAdd(bound, Shape{m, n}, Abs(bias));
          }
          if (relu) want = reference::Relu(want);
          for (float& b : bound) b *= 2 * (k + 2) * kEps;
          ExpectWithin("FusedMatMul", got, want, bound, "FusedMatMul " + what);
        }
      }
    }
  }
}

TEST_F(OpsGpuTest, ElementwiseBinaryOps) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values a = RandomValues(shape.num_elements(), c.scale, 3);
    const Values b = RandomValues(shape.num_elements(), c.scale, 4);
    const Tensor ta = Make(shape, a), tb = Make(shape, b);
    // One rounding each: exact against the double reference rounded once.
    ExpectClose("Add", Host(ops::Add(ta, tb)), reference::Add(a, b), 0, "Add " + Name(c));
    ExpectClose("Sub", Host(ops::Sub(ta, tb)), reference::Sub(a, b), 0, "Sub " + Name(c));
    ExpectClose("Mul", Host(ops::Mul(ta, tb)), reference::Mul(a, b), 0, "Mul " + Name(c));
    ExpectClose("Scale", Host(ops::Scale(ta, -1.5f)), reference::Scale(a, -1.5f), 0,
                "Scale " + Name(c));
    ExpectClose("ClipByValue", Host(ops::ClipByValue(ta, -0.25f * c.scale, 0.25f * c.scale)),
                reference::ClipByValue(a, -0.25f * c.scale, 0.25f * c.scale), 0,
                "ClipByValue " + Name(c));
    // Two roundings (product, sum): within 2ε of the larger operand.
    Values bound(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      bound[i] = 2 * kEps * (0.5f * std::fabs(a[i]) + std::fabs(b[i]));
    }
    ExpectWithin("Axpy", Host(ops::Axpy(0.5f, ta, tb)), reference::Axpy(0.5f, a, b), bound,
                 "Axpy " + Name(c));
  }
}

TEST_F(OpsGpuTest, BiasAdd) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values x = RandomValues(shape.num_elements(), c.scale, 5);
    const Values bias = RandomValues(c.cols, c.scale, 6);
    ExpectClose("BiasAdd", Host(ops::BiasAdd(Make(shape, x), Make(Shape{c.cols}, bias))),
                reference::BiasAdd(x, shape, bias), 0, "BiasAdd " + Name(c));
  }
}

TEST_F(OpsGpuTest, AddNIsTheCpuSumBitwise) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    // 11 inputs: more than one launch's worth (8), so the accumulating launch is covered.
    std::vector<Values> values;
    std::vector<Tensor> tensors, cpu_tensors;
    for (int i = 0; i < 11; ++i) {
      values.push_back(RandomValues(shape.num_elements(), c.scale, 10 + i));
      tensors.push_back(Make(shape, values.back()));
      cpu_tensors.push_back(Make(shape, values.back(), cpu_));
    }
    const Values got = Host(ops::AddN(tensors));
    Values bound(static_cast<size_t>(shape.num_elements()));
    for (size_t j = 0; j < bound.size(); ++j) {
      for (const Values& v : values) bound[j] += 11 * kEps * std::fabs(v[j]);
    }
    ExpectWithin("AddN", got, reference::AddN(values), bound, "AddN " + Name(c));
    // Added in the same order in float as the CPU kernel: the same bits. (Without the scope
    // the CPU inputs would be copied to the GPU and summed there.)
    DeviceScope on_cpu("/CPU:0");
    StatusOr<Tensor> cpu_sum = ops::AddN(cpu_tensors);
    ASSERT_TRUE(cpu_sum.ok()) << cpu_sum.status();
    EXPECT_EQ(cpu_sum->device(), cpu_);
    EXPECT_TRUE(SameBits(got, *cpu_sum->ToHost())) << "AddN vs CPU " + Name(c);
  }
  EXPECT_EQ(Host(ops::AddN({Make(Shape{2}, {1, 2})})), (Values{1, 2}));
}

TEST_F(OpsGpuTest, Reductions) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values x = RandomValues(shape.num_elements(), c.scale, 7);
    const Tensor t = Make(shape, x);
    // Accumulated in double: only the final rounding remains.
    for (auto axis : {ops::ReduceAxis::kAll, ops::ReduceAxis::kBatch}) {
      const std::string tag = Name(c) + (axis == ops::ReduceAxis::kAll ? " all" : " batch");
      StatusOr<Tensor> sum = ops::ReduceSum(t, axis);
      ASSERT_TRUE(sum.ok()) << sum.status();
      EXPECT_EQ(sum->shape(), axis == ops::ReduceAxis::kAll ? Shape() : Shape{c.cols}) << tag;
      const Values got = Host(sum);
      ExpectClose("ReduceSum", got, reference::ReduceSum(x, shape, axis), 2 * kEps,
                  "ReduceSum " + tag);
      ExpectClose("ReduceMean", Host(ops::ReduceMean(t, axis)),
                  reference::ReduceMean(x, shape, axis), 2 * kEps, "ReduceMean " + tag);
      // No atomics: the same bits every run.
      EXPECT_TRUE(SameBits(got, Host(ops::ReduceSum(t, axis)))) << "ReduceSum " + tag;
    }
  }
  // Mean of nothing is NaN; sum of nothing is zero.
  const Tensor empty = Make(Shape{0, 3}, {});
  EXPECT_TRUE(std::isnan(Host(ops::ReduceMean(empty))[0]));
  const Values mean_of_no_rows = Host(ops::ReduceMean(empty, ops::ReduceAxis::kBatch));
  ASSERT_EQ(mean_of_no_rows.size(), 3u);
  for (float v : mean_of_no_rows) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(Host(ops::ReduceSum(empty, ops::ReduceAxis::kBatch)), (Values{0, 0, 0}));
  EXPECT_EQ(Host(ops::ReduceSum(empty)), (Values{0}));
  // Rank 1 along the batch gives a scalar; a scalar sums to itself.
  EXPECT_EQ(Host(ops::ReduceSum(Make(Shape{3}, {1, 2, 3}), ops::ReduceAxis::kBatch)), Values{6});
  EXPECT_EQ(Host(ops::ReduceMean(Make(Shape{}, {2.5f}), ops::ReduceAxis::kBatch)), Values{2.5f});
}

TEST_F(OpsGpuTest, Activations) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values x = RandomValues(shape.num_elements(), c.scale * 4, 8);
    const Values dy = RandomValues(shape.num_elements(), 1, 9);
    const Tensor tx = Make(shape, x), tdy = Make(shape, dy);
    ExpectClose("Relu", Host(ops::Relu(tx)), reference::Relu(x), 0, "Relu " + Name(c));
    ExpectClose("ReluGrad", Host(ops::ReluGrad(tdy, tx)), reference::ReluGrad(dy, x), 0,
                "ReluGrad " + Name(c));
    // CUDA's expf and tanhf are within 2 ulps: a few ulps of the result in [−1, 1].
    const Values s = Host(ops::Sigmoid(tx));
    ExpectClose("Sigmoid", s, reference::Sigmoid(x), 4 * kEps, "Sigmoid " + Name(c));
    ExpectClose("SigmoidGrad", Host(ops::SigmoidGrad(tdy, Make(shape, s))),
                reference::SigmoidGrad(dy, s), 4 * kEps, "SigmoidGrad " + Name(c));
    const Values th = Host(ops::Tanh(tx));
    ExpectClose("Tanh", th, reference::Tanh(x), 4 * kEps, "Tanh " + Name(c));
    ExpectClose("TanhGrad", Host(ops::TanhGrad(tdy, Make(shape, th))), reference::TanhGrad(dy, th),
                4 * kEps, "TanhGrad " + Name(c));
  }
}

// The elementwise kernels take four elements at a time from 16-byte aligned tensors, and one
// at a time otherwise. Row views (Slice) that start 1, 2 or 3 floats past an aligned address
// take the second path, views that start on one the first with every tail length (n % 4 of
// 0 to 3): the same bits as the references either way.
TEST_F(OpsGpuTest, ElementwiseOpsOnViewsOfAnyAlignment) {
  const int64_t rows = 41;
  for (int64_t cols : {1, 3, 4, 8}) {
    const Shape shape{rows, cols};
    const Values a = RandomValues(shape.num_elements(), 2, 21);
    const Values b = RandomValues(shape.num_elements(), 2, 22);
    const Values bias = RandomValues(cols, 2, 23);
    const Tensor ta = Make(shape, a), tb = Make(shape, b), tbias = Make(Shape{cols}, bias);
    for (int64_t begin : {0, 1, 2, 3}) {
      for (int64_t end : {begin + 1, begin + 6, rows - 1, rows}) {
        const std::string what = std::to_string(cols) + " columns, rows [" +
                                 std::to_string(begin) + ", " + std::to_string(end) + ")";
        const Tensor va = *ta.Slice(begin, end), vb = *tb.Slice(begin, end);
        const Values sa(a.begin() + begin * cols, a.begin() + end * cols);
        const Values sb(b.begin() + begin * cols, b.begin() + end * cols);
        ExpectBitwise("Add", Host(ops::Add(va, vb)), reference::Add(sa, sb), "Add " + what);
        ExpectBitwise("Relu", Host(ops::Relu(va)), reference::Relu(sa), "Relu " + what);
        ExpectBitwise("ReluGrad", Host(ops::ReluGrad(vb, va)), reference::ReluGrad(sb, sa),
                      "ReluGrad " + what);
        ExpectBitwise("BiasAdd", Host(ops::BiasAdd(va, tbias)),
                      reference::BiasAdd(sa, va.shape(), bias), "BiasAdd " + what);
      }
    }
  }
}

TEST_F(OpsGpuTest, SoftmaxIsStableForLargeLogits) {
  for (const Case& c : kCases) {
    if (c.cols == 0) continue;
    const Shape shape{c.rows, c.cols};
    const Values x = RandomValues(shape.num_elements(), c.scale * 10, 11);
    const Values got = Host(ops::Softmax(Make(shape, x)));
    ExpectClose("Softmax", got, reference::Softmax(x, shape), 8 * kEps, "Softmax " + Name(c));
    for (float p : got) ASSERT_TRUE(std::isfinite(p));
    const Values dy = RandomValues(shape.num_elements(), 1, 12);
    ExpectClose("SoftmaxGrad", Host(ops::SoftmaxGrad(Make(shape, dy), Make(shape, got))),
                reference::SoftmaxGrad(dy, got, shape), 8 * kEps, "SoftmaxGrad " + Name(c));
  }
}

TEST_F(OpsGpuTest, MeanSquaredErrorAndGrad) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values p = RandomValues(shape.num_elements(), c.scale, 12);
    const Values t = RandomValues(shape.num_elements(), c.scale, 13);
    const int64_t global = c.rows + 3;  // a replica's shard of a larger global batch
    const float scale = 1.0f / (static_cast<float>(global) * std::max<int64_t>(c.cols, 1));
    const Tensor tp = Make(shape, p), tt = Make(shape, t);
    ExpectClose("MeanSquaredError", Host(ops::MeanSquaredError(tp, tt, global)),
                reference::MeanSquaredError(p, t, scale), 4 * kEps, "MSE " + Name(c));
    ExpectClose("MeanSquaredErrorGrad", Host(ops::MeanSquaredErrorGrad(tp, tt, global)),
                reference::MeanSquaredErrorGrad(p, t, scale), 4 * kEps, "MSE grad " + Name(c));
  }
  // Keras's value on a tiny example: mean over features, then over the batch.
  const Tensor pred = Make(Shape{2, 2}, {1, 2, 3, 4});
  const Tensor target = Make(Shape{2, 2}, {1, 0, 0, 4});
  EXPECT_FLOAT_EQ(Host(ops::MeanSquaredError(pred, target))[0], (4.0f / 2 + 9.0f / 2) / 2);
}

TEST_F(OpsGpuTest, SparseSoftmaxCrossEntropyAndGrad) {
  for (const Case& c : kCases) {
    if (c.cols == 0) continue;
    const Shape shape{c.rows, c.cols};
    const Values logits = RandomValues(shape.num_elements(), c.scale * 5, 14);
    std::vector<int32_t> labels(static_cast<size_t>(c.rows));
    for (int64_t i = 0; i < c.rows; ++i) labels[i] = static_cast<int32_t>((i * 7) % c.cols);
    const int64_t global = c.rows + 1;
    const float scale = 1.0f / static_cast<float>(global);
    const Tensor tl = Make(shape, logits);
    const Tensor ty = MakeLabels(labels);
    ExpectClose("SparseSoftmaxCrossEntropy", Host(ops::SparseSoftmaxCrossEntropy(tl, ty, global)),
                reference::SparseSoftmaxCrossEntropy(logits, shape, labels, scale), 16 * kEps,
                "CE " + Name(c));
    ExpectClose("SparseSoftmaxCrossEntropyGrad",
                Host(ops::SparseSoftmaxCrossEntropyGrad(tl, ty, global)),
                reference::SparseSoftmaxCrossEntropyGrad(logits, shape, labels, scale), 8 * kEps,
                "CE grad " + Name(c));
  }
}

TEST_F(OpsGpuTest, CrossEntropyRejectsLabelsOutOfRangeWithTheCpuMessage) {
  const Tensor logits = Make(Shape{3, 4}, RandomValues(12, 1, 15));
  StatusOr<Tensor> loss = ops::SparseSoftmaxCrossEntropy(logits, MakeLabels({0, 4, -1}));
  EXPECT_TRUE(IsInvalidArgument(loss.status())) << loss.status();
  // The lowest offending row, as the CPU kernel reports it.
  EXPECT_THAT(loss.status().message(), HasSubstr("label 4 at row 1 is outside [0, 4)"));
  EXPECT_THAT(loss.status().message(), HasSubstr("SparseSoftmaxCrossEntropy on "
                                                 "/job:localhost/replica:0/task:0/device:GPU:0"));
  StatusOr<Tensor> grad = ops::SparseSoftmaxCrossEntropyGrad(logits, MakeLabels({0, 1, -1}));
  EXPECT_TRUE(IsInvalidArgument(grad.status())) << grad.status();
  EXPECT_THAT(grad.status().message(), HasSubstr("label -1 at row 2 is outside [0, 4)"));
  // Bad rows far apart, in different blocks: still the lowest one.
  std::vector<int32_t> labels(5000, 1);
  labels[4321] = 9;
  labels[1234] = 7;
  const Tensor wide = Make(Shape{5000, 4}, RandomValues(20000, 1, 16));
  EXPECT_THAT(ops::SparseSoftmaxCrossEntropy(wide, MakeLabels(labels)).status().message(),
              HasSubstr("label 7 at row 1234 is outside [0, 4)"));
  EXPECT_THAT(ops::SparseSoftmaxCrossEntropyGrad(wide, MakeLabels(labels)).status().message(),
              HasSubstr("label 7 at row 1234 is outside [0, 4)"));
  // The device is fine afterwards.
  EXPECT_EQ(Host(ops::Scale(Make(Shape{2}, {1, 2}), 2)), (Values{2, 4}));
}

TEST_F(OpsGpuTest, FillAndConcat) {
  ExpectBitwise("Fill", Host(ops::Fill(Shape{2, 3}, 2.5f, gpu_)), reference::Fill(6, 2.5f),
                "Fill [2, 3]");
  ExpectBitwise("Fill", Host(ops::Fill(Shape{1001, 7}, -3.0f, gpu_)), reference::Fill(7007, -3.0f),
                "Fill [1001, 7]");
  EXPECT_EQ(Host(ops::Zeros(Shape{0, 3}, gpu_)), Values{});
  const Values a = RandomValues(6, 1, 16), b = RandomValues(9, 1, 17);
  StatusOr<Tensor> joined =
      ops::Concat({Make(Shape{2, 3}, a), Make(Shape{0, 3}, {}), Make(Shape{3, 3}, b)});
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->shape(), (Shape{5, 3}));
  ExpectBitwise("Concat", Host(joined), reference::Concat({a, b}), "Concat");
  // int32 tensors join as bytes.
  StatusOr<Tensor> labels = ops::Concat({MakeLabels({1, 2}), MakeLabels({3})});
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(labels->device(), gpu_);
  EXPECT_EQ(*labels->ToHostInt32(), (std::vector<int32_t>{1, 2, 3}));
}

TEST_F(OpsGpuTest, RandomValuesAreBitwiseTheReferenceAndTheCpus) {
  const Shape shapes[] = {Shape{0}, Shape{1}, Shape{7, 13}, Shape{257, 129}, Shape{1000003}};
  for (const uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0xDEADBEEFCAFEF00Dull}}) {
    for (const Shape& shape : shapes) {
      const std::string tag = shape.ToString() + " seed " + std::to_string(seed);
      const int64_t n = shape.num_elements();
      const attrs::Random uniform{seed, -2.5f, 7.0f};
      const Values u = Host(ops::RandomUniform(shape, uniform.a, uniform.b, seed, gpu_));
      ExpectBitwise("RandomUniform", u, reference::RandomUniform(n, uniform), "uniform " + tag);
      EXPECT_TRUE(
          SameBits(u, *ops::RandomUniform(shape, uniform.a, uniform.b, seed, cpu_)->ToHost()))
          << "uniform vs CPU " << tag;
      const attrs::Random normal{seed, 1.5f, 3.0f};
      const Values z = Host(ops::RandomNormal(shape, normal.a, normal.b, seed, gpu_));
      // The reference's log and cos are the C library's: within float rounding.
      ExpectClose("RandomNormal", z, reference::RandomNormal(n, normal), 2e-6f, "normal " + tag);
      EXPECT_TRUE(
          SameBits(z, *ops::RandomNormal(shape, normal.a, normal.b, seed, cpu_)->ToHost()))
          << "normal vs CPU " << tag;
    }
  }
}

TEST_F(OpsGpuTest, SgdUpdates) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values w = RandomValues(shape.num_elements(), c.scale, 18);
    const Values g = RandomValues(shape.num_elements(), c.scale, 19);
    for (float momentum : {0.0f, 0.9f}) {
      for (bool nesterov : {false, true}) {
        Tensor var = Make(shape, w);
        Tensor velocity = Make(shape, Values(w.size(), 0.0f));
        const Tensor grad = Make(shape, g);
        Tensor cpu_var = Make(shape, w, cpu_);
        Tensor cpu_velocity = Make(shape, Values(w.size(), 0.0f), cpu_);
        const Tensor cpu_grad = Make(shape, g, cpu_);
        Values want_w = w, want_v(w.size(), 0.0f);
        const attrs::Sgd sgd{0.1f, momentum, nesterov};
        for (int step = 0; step < 3; ++step) {
          ASSERT_TRUE(ops::ApplySgdMomentum(var, velocity, grad, 0.1f, momentum, nesterov).ok());
          ASSERT_TRUE(
              ops::ApplySgdMomentum(cpu_var, cpu_velocity, cpu_grad, 0.1f, momentum, nesterov)
                  .ok());
          reference::ApplySgd(&want_w, &want_v, g, sgd);
        }
        EXPECT_EQ(var.device(), gpu_);
        const std::string tag =
            Name(c) + " momentum " + std::to_string(momentum) + (nesterov ? " nesterov" : "");
        // A few roundings of values as large as the weight and the gradient (the result may
        // be much smaller than either: cancellation).
        Values bound(w.size());
        for (size_t i = 0; i < w.size(); ++i) {
          bound[i] = 16 * kEps * (std::fabs(w[i]) + std::fabs(g[i]));
        }
        const Values got_w = Host(var);
        const Values got_v = Host(velocity);
        ExpectWithin("ApplySgd", got_w, want_w, bound, "SGD var " + tag);
        ExpectWithin("ApplySgd", got_v, want_v, bound, "SGD velocity " + tag);
        // Rounded as the CPU kernel rounds: CPU and GPU replicas stay identical.
        EXPECT_TRUE(SameBits(got_w, *cpu_var.ToHost())) << "SGD var vs CPU " << tag;
        EXPECT_TRUE(SameBits(got_v, *cpu_velocity.ToHost())) << "SGD velocity vs CPU " << tag;
      }
    }
    Tensor var = Make(shape, w);
    Tensor cpu_var = Make(shape, w, cpu_);
    ASSERT_TRUE(ops::ApplySgd(var, Make(shape, g), 0.25f).ok());
    ASSERT_TRUE(ops::ApplySgd(cpu_var, Make(shape, g, cpu_), 0.25f).ok());
    Values want = w;
    reference::ApplySgd(&want, nullptr, g, attrs::Sgd{0.25f, 0, false});
    const Values got = Host(var);
    ExpectClose("ApplySgd", got, want, 2 * kEps, "plain SGD " + Name(c));
    EXPECT_TRUE(SameBits(got, *cpu_var.ToHost())) << "plain SGD vs CPU " << Name(c);
  }
}

TEST_F(OpsGpuTest, AdamUpdates) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values w = RandomValues(shape.num_elements(), c.scale, 30);
    const Values zeros(w.size(), 0.0f);
    Tensor var = Make(shape, w), m = Make(shape, zeros), v = Make(shape, zeros);
    Values want_w = w, want_m = zeros, want_v = zeros;
    for (int step = 1; step <= 4; ++step) {
      const Values g = RandomValues(shape.num_elements(), c.scale, 30 + step);
      ASSERT_TRUE(ops::ApplyAdam(var, m, v, Make(shape, g), 0.01f, 0.9f, 0.999f, 1e-7f, step).ok());
      const double alpha = 0.01 * std::sqrt(1 - std::pow(0.999, step)) / (1 - std::pow(0.9, step));
      reference::ApplyAdam(&want_w, &want_m, &want_v, g,
                           attrs::Adam{static_cast<float>(alpha), 0.9f, 0.999f, 1e-7f});
    }
    // Each step moves a weight by about alpha: errors relative to the weight and to alpha.
    Values bound(w.size());
    for (size_t i = 0; i < w.size(); ++i) bound[i] = 16 * kEps * std::fabs(w[i]) + 1e-5f * 0.04f;
    ExpectWithin("ApplyAdam", Host(var), want_w, bound, "Adam var " + Name(c));
    // The moments mix gradients of size `scale` (and scale²): cancellation can leave them
    // much smaller than their terms, so the bounds are relative to the terms.
    ExpectWithin("ApplyAdam", Host(m), want_m, Values(w.size(), 16 * kEps * c.scale),
                 "Adam m " + Name(c));
    ExpectWithin("ApplyAdam", Host(v), want_v, Values(w.size(), 16 * kEps * c.scale * c.scale),
                 "Adam v " + Name(c));
  }
}

TEST_F(OpsGpuTest, AdamWDecaysEachWeightBeforeTheAdamStep) {
  for (const Case& c : kCases) {
    const Shape shape{c.rows, c.cols};
    const Values w = RandomValues(shape.num_elements(), c.scale, 40);
    const Values zeros(w.size(), 0.0f);
    Tensor var = Make(shape, w), m = Make(shape, zeros), v = Make(shape, zeros);
    Values want_w = w, want_m = zeros, want_v = zeros;
    for (int step = 1; step <= 4; ++step) {
      const Values g = RandomValues(shape.num_elements(), c.scale, 40 + step);
      ASSERT_TRUE(
          ops::ApplyAdam(var, m, v, Make(shape, g), 0.01f, 0.9f, 0.999f, 1e-7f, step, 0.5f).ok());
      const double alpha = 0.01 * std::sqrt(1 - std::pow(0.999, step)) / (1 - std::pow(0.9, step));
      reference::ApplyAdam(&want_w, &want_m, &want_v, g,
                           attrs::Adam{static_cast<float>(alpha), 0.9f, 0.999f, 1e-7f,
                                       static_cast<float>(0.01 * 0.5)});
    }
    Values bound(w.size());
    for (size_t i = 0; i < w.size(); ++i) bound[i] = 16 * kEps * std::fabs(w[i]) + 1e-5f * 0.04f;
    ExpectWithin("ApplyAdam", Host(var), want_w, bound, "AdamW var " + Name(c));
  }
}

// Mixed precision's 16-bit ops have CPU kernels only: given bfloat16 or float16 inputs the
// CUDA kernels fail by name instead of reading the 16-bit bytes as floats.
TEST_F(OpsGpuTest, SixteenBitInputsAreRefusedByName) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    const std::vector<uint16_t> bits(6, dtype == DType::kBFloat16 ? 0x3F80 : 0x3C00);  // 1.0
    const Tensor x = *Tensor::FromHostBytes(gpu_, Shape{2, 3}, dtype, bits.data());
    const Tensor x_t = *Tensor::FromHostBytes(gpu_, Shape{3, 2}, dtype, bits.data());
    const Tensor bias = Make(Shape{3}, {1, 2, 3});
    const std::pair<const char*, Status> cases[] = {
        {"Relu", ops::Relu(x).status()},
        {"ReluGrad", ops::ReluGrad(x, x).status()},
        {"Sigmoid", ops::Sigmoid(x).status()},
        {"SigmoidGrad", ops::SigmoidGrad(x, x).status()},
        {"Tanh", ops::Tanh(x).status()},
        {"TanhGrad", ops::TanhGrad(x, x).status()},
        {"BiasAdd", ops::BiasAdd(x, bias).status()},
        {"ReduceSum", ops::ReduceSum(x, ops::ReduceAxis::kBatch).status()},
        {"ReduceMean", ops::ReduceMean(x).status()},
        {"MatMul", ops::MatMul(x, x_t).status()},
    };
    for (const auto& [op, status] : cases) {
      EXPECT_EQ(status.code(), StatusCode::kUnimplemented) << op << ": " << status;
      EXPECT_THAT(status.message(),
                  HasSubstr(std::string(op) + ": " + std::string(DTypeName(dtype)) +
                            " inputs have no CUDA kernel yet (mixed precision runs on CPU "
                            "replicas)"));
    }
  }
}

TEST_F(OpsGpuTest, CastPlacedOnTheGpuFallsBackToTheCpu) {
  const Tensor x = Make(Shape{3}, {1.5f, -2.5f, 70000.0f});
  DeviceScope scope("/GPU:0");
  StatusOr<Tensor> y = ops::Cast(x, DType::kInt32);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(y->device()->is_cpu()) << y->device()->full_name();
  EXPECT_EQ(*y->ToHostInt32(), (std::vector<int32_t>{1, -2, 70000}));
  // Ops with a CUDA kernel under the same scope stay on the GPU.
  EXPECT_EQ(ops::Scale(x, 2)->device(), gpu_);
}

}  // namespace
}  // namespace tower
