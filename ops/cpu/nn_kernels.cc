// CPU kernels of the neural-network ops: activations and their gradients, softmax, losses.
#include <array>
#include <cmath>
#include <string>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/eigen.h"
#include "ops/cpu/parallel.h"
#include "ops/op_attrs.h"

namespace tower::cpu {

namespace {

// The 16-bit side of an activation or its gradient (inputs x, or dy and y or x: all of the
// output's dtype): f(a, out) or f(a, b, out) on Eigen maps of float blocks is the float32
// kernel's own arithmetic, written as it is written there (ops_cpu_test checks that both
// give the same bits).
template <size_t kInputs, typename F>
Status Activation16(const KernelContext& ctx, const F& f) {
  std::array<const Tensor*, kInputs> inputs;
  for (size_t k = 0; k < kInputs; ++k) inputs[k] = &ctx.input(k);
  Elementwise16(inputs, ctx.output(0), ctx.output(0).num_elements(),
                [&f](const float* const* in, float* out, int64_t, int64_t n) {
                  if constexpr (kInputs == 1) {
                    f(ConstArrayMap(in[0], n), ArrayMap(out, n));
                  } else {
                    f(ConstArrayMap(in[0], n), ConstArrayMap(in[1], n), ArrayMap(out, n));
                  }
                });
  return OkStatus();
}

}  // namespace

Status Relu(const KernelContext& ctx) {
  if (Is16BitFloat(ctx.output(0).dtype())) {
    return Activation16<1>(ctx, [](const auto& x, auto out) { out = ReluOf(x); });
  }
  MutableFlat(ctx.output(0)) = ReluOf(Flat(ctx.input(0)));
  return OkStatus();
}

Status ReluGrad(const KernelContext& ctx) {  // inputs: dy, x
  if (Is16BitFloat(ctx.output(0).dtype())) {
    return Activation16<2>(ctx, [](const auto& dy, const auto& x, auto out) {  // the loop below
      for (Eigen::Index i = 0; i < out.size(); ++i) out[i] = x[i] > 0.0f ? dy[i] : 0.0f;
    });
  }
  // A plain loop: the compiler turns it into masked vector moves. (Eigen's
  // (x > 0).select(dy, 0) is not vectorised, and cost the mlp step 10% of its time.) Split
  // over the call's intra-op threads: each element's result is the same whoever computes it.
  const float* dy = ctx.input(0).data<float>();
  const float* x = ctx.input(1).data<float>();
  float* out = ctx.output(0).data<float>();
  ParallelRanges(out, ctx.output(0).num_elements(), kMinSplitElements,
                 [=](int64_t begin, int64_t end) {
                   for (int64_t i = begin; i < end; ++i) out[i] = x[i] > 0.0f ? dy[i] : 0.0f;
                 });
  return OkStatus();
}

Status Sigmoid(const KernelContext& ctx) {
  if (Is16BitFloat(ctx.output(0).dtype())) {
    return Activation16<1>(ctx, [](const auto& x, auto out) { out = x.logistic(); });
  }
  MutableFlat(ctx.output(0)) = Flat(ctx.input(0)).logistic();
  return OkStatus();
}

Status SigmoidGrad(const KernelContext& ctx) {  // inputs: dy, y = sigmoid(x)
  if (Is16BitFloat(ctx.output(0).dtype())) {
    return Activation16<2>(ctx, [](const auto& dy, const auto& y, auto out) {
      out = dy * y * (1.0f - y);
    });
  }
  const auto y = Flat(ctx.input(1));
  MutableFlat(ctx.output(0)) = Flat(ctx.input(0)) * y * (1.0f - y);
  return OkStatus();
}

Status Tanh(const KernelContext& ctx) {
  if (Is16BitFloat(ctx.output(0).dtype())) {
    return Activation16<1>(ctx, [](const auto& x, auto out) { out = x.tanh(); });
  }
  MutableFlat(ctx.output(0)) = Flat(ctx.input(0)).tanh();
  return OkStatus();
}

Status TanhGrad(const KernelContext& ctx) {  // inputs: dy, y = tanh(x)
  if (Is16BitFloat(ctx.output(0).dtype())) {
    return Activation16<2>(ctx, [](const auto& dy, const auto& y, auto out) {
      out = dy * (1.0f - y * y);
    });
  }
  const auto y = Flat(ctx.input(1));
  MutableFlat(ctx.output(0)) = Flat(ctx.input(0)) * (1.0f - y * y);
  return OkStatus();
}

namespace {

// Row i of logits[n, c] -> probabilities; returns log Σ exp (for the loss).
float SoftmaxRow(const float* logits, int64_t c, float* out) {
  float max = -INFINITY;
  for (int64_t j = 0; j < c; ++j) max = std::max(max, logits[j]);
  double sum = 0;
  for (int64_t j = 0; j < c; ++j) {
    const float e = std::exp(logits[j] - max);
    out[j] = e;
    sum += e;
  }
  const float inverse = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < c; ++j) out[j] *= inverse;
  return max + static_cast<float>(std::log(sum));
}

Status CheckLabel(int32_t label, int64_t row, int64_t classes) {
  if (label >= 0 && label < classes) return OkStatus();
  return InvalidArgumentError("label " + std::to_string(label) + " at row " +
                              std::to_string(row) + " is outside [0, " +
                              std::to_string(classes) + ")");
}

}  // namespace

Status Softmax(const KernelContext& ctx) {
  const Tensor& logits = ctx.input(0);
  const int64_t n = Rows(logits);
  const int64_t c = Cols(logits);
  for (int64_t i = 0; i < n; ++i) {
    SoftmaxRow(logits.data<float>() + i * c, c, ctx.output(0).data<float>() + i * c);
  }
  return OkStatus();
}

Status SoftmaxGrad(const KernelContext& ctx) {  // inputs: dy, y
  const Tensor& y = ctx.input(1);
  const int64_t n = Rows(y);
  const int64_t c = Cols(y);
  const ConstMatrixMap dy = Matrix(ctx.input(0), n, c);
  const ConstMatrixMap ym = Matrix(y, n, c);
  const Eigen::VectorXf dot = (dy.array() * ym.array()).rowwise().sum();
  MutableMatrix(ctx.output(0), n, c).array() =
      ym.array() * (dy.array().colwise() - dot.array());
  return OkStatus();
}

Status MeanSquaredError(const KernelContext& ctx) {  // inputs: pred, target -> scalar
  const double sum =
      (Flat(ctx.input(0)) - Flat(ctx.input(1))).square().cast<double>().sum();
  ctx.output(0).data<float>()[0] =
      static_cast<float>(sum * ctx.attr<attrs::Loss>().scale);
  return OkStatus();
}

Status MeanSquaredErrorGrad(const KernelContext& ctx) {  // inputs: pred, target
  const float factor = 2.0f * ctx.attr<attrs::Loss>().scale;
  MutableFlat(ctx.output(0)) = (Flat(ctx.input(0)) - Flat(ctx.input(1))) * factor;
  return OkStatus();
}

Status SparseSoftmaxCrossEntropy(const KernelContext& ctx) {  // logits[n, c], labels[n]
  const Tensor& logits = ctx.input(0);
  const int32_t* labels = ctx.input(1).data<int32_t>();
  const int64_t n = Rows(logits);
  const int64_t c = Cols(logits);
  std::vector<float> row(static_cast<size_t>(c));
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    TOWER_RETURN_IF_ERROR(CheckLabel(labels[i], i, c));
    const float* l = logits.data<float>() + i * c;
    const float log_sum = SoftmaxRow(l, c, row.data());
    total += static_cast<double>(log_sum) - l[labels[i]];
  }
  ctx.output(0).data<float>()[0] = static_cast<float>(total * ctx.attr<attrs::Loss>().scale);
  return OkStatus();
}

Status SparseSoftmaxCrossEntropyGrad(const KernelContext& ctx) {
  const Tensor& logits = ctx.input(0);
  const int32_t* labels = ctx.input(1).data<int32_t>();
  const float scale = ctx.attr<attrs::Loss>().scale;
  const int64_t n = Rows(logits);
  const int64_t c = Cols(logits);
  float* out = ctx.output(0).data<float>();
  for (int64_t i = 0; i < n; ++i) {
    TOWER_RETURN_IF_ERROR(CheckLabel(labels[i], i, c));
    float* row = out + i * c;
    SoftmaxRow(logits.data<float>() + i * c, c, row);
    row[labels[i]] -= 1.0f;
    for (int64_t j = 0; j < c; ++j) row[j] *= scale;
  }
  return OkStatus();
}

}  // namespace tower::cpu
