// CPU kernels of the math ops: Eigen over the tensors' buffers, single-threaded per call.
#include <algorithm>
#include <limits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/eigen.h"
#include "ops/op_attrs.h"

namespace tower::cpu {

Status MatMul(const KernelContext& ctx) {
  const auto& attrs = ctx.attr<attrs::MatMul>();
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& c = ctx.output(0);
  const int64_t m = c.shape().dim(0);
  const int64_t n = c.shape().dim(1);
  const int64_t k = attrs.transpose_a ? a.shape().dim(0) : a.shape().dim(1);
  MatrixMap out = MutableMatrix(c, m, n);
  if (k == 0) {
    out.setZero();
    return OkStatus();
  }
  const ConstMatrixMap am = Matrix(a, a.shape().dim(0), a.shape().dim(1));
  const ConstMatrixMap bm = Matrix(b, b.shape().dim(0), b.shape().dim(1));
  if (!attrs.transpose_a && !attrs.transpose_b) {
    out.noalias() = am * bm;
  } else if (attrs.transpose_a && !attrs.transpose_b) {
    out.noalias() = am.transpose() * bm;
  } else if (!attrs.transpose_a && attrs.transpose_b) {
    out.noalias() = am * bm.transpose();
  } else {
    out.noalias() = am.transpose() * bm.transpose();
  }
  return OkStatus();
}

Status BiasAdd(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& bias = ctx.input(1);
  const int64_t c = bias.num_elements();
  const int64_t rows = c == 0 ? 0 : x.num_elements() / c;
  MutableMatrix(ctx.output(0), rows, c) =
      Matrix(x, rows, c).rowwise() + Matrix(bias, 1, c).row(0);
  return OkStatus();
}

Status Add(const KernelContext& ctx) {
  MutableFlat(ctx.output(0)) = Flat(ctx.input(0)) + Flat(ctx.input(1));
  return OkStatus();
}

Status Sub(const KernelContext& ctx) {
  MutableFlat(ctx.output(0)) = Flat(ctx.input(0)) - Flat(ctx.input(1));
  return OkStatus();
}

Status Mul(const KernelContext& ctx) {
  MutableFlat(ctx.output(0)) = Flat(ctx.input(0)) * Flat(ctx.input(1));
  return OkStatus();
}

Status Scale(const KernelContext& ctx) {
  MutableFlat(ctx.output(0)) = Flat(ctx.input(0)) * ctx.attr<attrs::Scalar>().value;
  return OkStatus();
}

Status Axpy(const KernelContext& ctx) {
  const float alpha = ctx.attr<attrs::Scalar>().value;
  MutableFlat(ctx.output(0)) = Flat(ctx.input(0)) * alpha + Flat(ctx.input(1));
  return OkStatus();
}

Status AddN(const KernelContext& ctx) {
  ArrayMap out = MutableFlat(ctx.output(0));
  out = Flat(ctx.input(0));
  for (size_t i = 1; i < ctx.inputs.size(); ++i) out += Flat(ctx.input(i));
  return OkStatus();
}

namespace {

// Sum of a [rows, cols] block along rows, accumulated in double per column so that long
// batches do not lose the small terms (the reduction feeds gradients and losses).
void SumRows(const float* x, int64_t rows, int64_t cols, float* out, double divisor) {
  constexpr int64_t kBlock = 256;
  double acc[kBlock];
  for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
    const int64_t width = std::min(kBlock, cols - c0);
    for (int64_t j = 0; j < width; ++j) acc[j] = 0;
    for (int64_t i = 0; i < rows; ++i) {
      const float* row = x + i * cols + c0;
      for (int64_t j = 0; j < width; ++j) acc[j] += row[j];
    }
    for (int64_t j = 0; j < width; ++j) out[c0 + j] = static_cast<float>(acc[j] / divisor);
  }
}

Status Reduce(const KernelContext& ctx, bool mean) {
  const Tensor& x = ctx.input(0);
  float* out = ctx.output(0).data<float>();
  const bool all = ctx.attr<attrs::Reduce>().axis == attrs::ReduceAxis::kAll ||
                   x.shape().rank() == 0;
  const int64_t rows = all ? x.num_elements() : Rows(x);
  const int64_t cols = all ? 1 : Cols(x);
  if (rows == 0 && mean) {
    for (int64_t j = 0; j < cols; ++j) out[j] = std::numeric_limits<float>::quiet_NaN();
    return OkStatus();
  }
  const double divisor = mean ? static_cast<double>(rows) : 1.0;
  if (cols == 1) {
    const double sum = Eigen::Map<const Eigen::ArrayXf>(x.data<float>(), rows).cast<double>().sum();
    out[0] = static_cast<float>(sum / divisor);
    return OkStatus();
  }
  SumRows(x.data<float>(), rows, cols, out, divisor);
  return OkStatus();
}

}  // namespace

Status ReduceSum(const KernelContext& ctx) { return Reduce(ctx, /*mean=*/false); }
Status ReduceMean(const KernelContext& ctx) { return Reduce(ctx, /*mean=*/true); }

}  // namespace tower::cpu
