// CPU kernels of the math ops: Eigen over the tensors' buffers. Large products split over
// the intra-op threads of the call (device/intra_op.h); everything else runs on the caller.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "device/intra_op.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/eigen.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/half_matmul.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/shared_packing.h"
#include "ops/op_attrs.h"

namespace tower::cpu {

namespace {

// ---- Splitting a product over intra-op threads.
// Each chunk is an independent Eigen GEMM over a block of the output, so a chunk's bits do not
// depend on the thread that runs it. Eigen computes a row-major product as the transposed
// column-major one: the output's columns are the rows of Eigen's kernel, taken in groups of
// three SIMD packets (24 floats with AVX2, 48 with AVX-512) while the leftover rows are summed
// in another order (two accumulators per lane). Column chunks therefore start at multiples of
// 48, which keeps every column in the group it has in the whole product: the split result is
// then the same bits as the unsplit one, for any thread count (tests/ops/cpu_threads_test.cc
// checks it). The output's rows are Eigen's columns, taken 4 at a time: row chunks start at
// multiples of 8.
constexpr int64_t kColumnAlign = 48;
constexpr int64_t kRowAlign = 8;
// Below this many flops a chunk does not repay handing it to another thread (≈ 20 µs of one
// core's GEMM; waking a blocked worker costs 10-50 µs): linreg's 64×1 products never split.
constexpr double kMinChunkFlops = 2e6;

struct MatMulJob {
  GemmOperands gemm;  // out[m, n] = op(a) · op(b), or += (MatMulAdd)
  ConstMatrixMap a;   // the same operands as Eigen sees them, for the blocks it computes
  ConstMatrixMap b;
  bool by_columns;  // else by rows
  int chunks;
  GemmSharing sharing;  // column chunks: the activations packed once for all of them
};

// out[r0:r1, c0:c1] = op(a)[r0:r1, :] · op(b)[:, c0:c1] (or +=), as Eigen computes `out = a · b`:
// through Tower's loop over Eigen's kernel (ops/cpu/gemm.h), which writes the first depth
// block instead of zeroing the block and adding to it; else (a block Eigen multiplies another
// way) through Eigen, the zeroing done here a row at a time with memset: Eigen zeroes a block
// of a row-major matrix element by element (~6% of a split mlp step). Then the epilogue: in
// the loop, tile by tile; after Eigen, on the block.
void ProductBlock(const MatMulJob& job, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const GemmOperands& g = job.gemm;
  if (GemmBlock(g, r0, r1, c0, c1, job.sharing)) return;
  for (int64_t r = r0; r < r1 && !g.accumulate; ++r) {
    std::memset(g.out + r * g.n + c0, 0, static_cast<size_t>(c1 - c0) * sizeof(float));
  }
  MatrixMap whole(g.out, g.m, g.n);
  auto out = whole.block(r0, c0, r1 - r0, c1 - c0);
  if (!g.transpose_a && !g.transpose_b) {
    out.noalias() += job.a.middleRows(r0, r1 - r0) * job.b.middleCols(c0, c1 - c0);
  } else if (g.transpose_a && !g.transpose_b) {
    out.noalias() += job.a.middleCols(r0, r1 - r0).transpose() * job.b.middleCols(c0, c1 - c0);
  } else if (!g.transpose_a && g.transpose_b) {
    out.noalias() += job.a.middleRows(r0, r1 - r0) * job.b.middleRows(c0, c1 - c0).transpose();
  } else {
    out.noalias() +=
        job.a.middleCols(r0, r1 - r0).transpose() * job.b.middleRows(c0, c1 - c0).transpose();
  }
  ApplyEpilogue(g.epilogue, g.out, g.n, r0, r1, c0, c1);
}

// Where chunk `c` starts along a split dimension of `extent` (c = chunks: the end): the
// multiple of `align` nearest to c/chunks of the way. Each chunk gets at least one unit
// (chunks <= extent / align), and the leftover (< align) falls to the last.
int64_t ChunkStart(int64_t c, int chunks, int64_t extent, int64_t align) {
  if (c == chunks) return extent;
  return align * ((2 * c * extent + chunks * align) / (2 * chunks * align));
}

void ProductChunk(void* context, int chunk) {
  const MatMulJob& job = *static_cast<const MatMulJob*>(context);
  const int64_t align = job.by_columns ? kColumnAlign : kRowAlign;
  const int64_t extent = job.by_columns ? job.gemm.n : job.gemm.m;
  const int64_t begin = ChunkStart(chunk, job.chunks, extent, align);
  const int64_t end = ChunkStart(chunk + 1, job.chunks, extent, align);
  if (job.by_columns) {
    ProductBlock(job, 0, job.gemm.m, begin, end);
  } else {
    ProductBlock(job, begin, end, 0, job.gemm.n);
  }
}

// out = op(a) · op(b), or out += it (accumulate): float32 a, b and out; then the epilogue
// (not with accumulate).
void Product(const KernelContext& ctx, const attrs::MatMul& attrs, const Tensor& c,
             bool accumulate, const GemmEpilogue& epilogue) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const int64_t m = c.shape().dim(0);
  const int64_t n = c.shape().dim(1);
  const int64_t k = attrs.transpose_a ? a.shape().dim(0) : a.shape().dim(1);
  if (k == 0) {
    if (!accumulate) MutableMatrix(c, m, n).setZero();
    ApplyEpilogue(epilogue, c.data<float>(), n, 0, m, 0, n);
    return;
  }
  MatMulJob job{GemmOperands{a.data<float>(), b.data<float>(), c.data<float>(), m, n, k,
                             attrs.transpose_a, attrs.transpose_b, accumulate, epilogue},
                Matrix(a, a.shape().dim(0), a.shape().dim(1)),
                Matrix(b, b.shape().dim(0), b.shape().dim(1)),
                /*by_columns=*/true,
                /*chunks=*/1,
                /*sharing=*/{}};
  // Chunks: at most the threads this call may use, each of at least kMinChunkFlops, along the
  // dimension that gives more of them (columns when equal). They depend on the shapes and
  // the budget only.
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) *
                       static_cast<double>(k);
  if (flops >= 2 * kMinChunkFlops) {
    const int64_t wanted = std::min<int64_t>(CurrentIntraOpThreads(),
                                             static_cast<int64_t>(flops / kMinChunkFlops));
    const int64_t column_units = n / kColumnAlign;
    const int64_t row_units = m / kRowAlign;
    const int64_t by_columns = std::min(wanted, column_units);
    const int64_t by_rows = std::min(wanted, row_units);
    if (std::max(by_columns, by_rows) >= 2) {
      job.by_columns = by_columns >= by_rows;
      job.chunks = static_cast<int>(job.by_columns ? by_columns : by_rows);
    }
  }
  if (job.chunks > 1) {
    SharedBlocks activations;
    if (job.by_columns && PrepareSharedActivations(
                              job.gemm, ChunkStart(1, job.chunks, n, kColumnAlign), &activations)) {
      job.sharing.activations = &activations;
    }
    ParallelFor(job.chunks, ProductChunk, &job);
    return;
  }
  // A weight the replicas share (ops::MatMulByWeight): its packing is kept for all of them,
  // where that pays (ProductWithSharedPacking decides).
  if (!attrs.transpose_a && !accumulate &&
      ProductWithSharedPacking(a.data<float>(), m, k, b.data<float>(), n, attrs.transpose_b,
                               attrs.b_version, c.data<float>(), epilogue)) {
    return;
  }
  ProductBlock(job, 0, m, 0, n);  // one chunk: the whole product
}

}  // namespace

Status MatMul(const KernelContext& ctx) {
  if (ctx.input(0).dtype() != DType::kFloat32) {
    const auto& attrs = ctx.attr<attrs::MatMul>();
    return HalfMatMul(ctx.input(0), ctx.input(1), attrs.transpose_a, attrs.transpose_b,
                      ctx.output(0));
  }
  Product(ctx, ctx.attr<attrs::MatMul>(), ctx.output(0), /*accumulate=*/false, {});
  return OkStatus();
}

// In place: inputs a, b and the sum (float32).
Status MatMulAdd(const KernelContext& ctx) {
  Product(ctx, ctx.attr<attrs::MatMul>(), ctx.input(2), /*accumulate=*/true, {});
  return OkStatus();
}

// Inputs x, weight and, where attrs.has_bias, the bias (float32).
Status FusedMatMul(const KernelContext& ctx) {
  const auto& attrs = ctx.attr<attrs::FusedMatMul>();
  const GemmEpilogue epilogue{attrs.has_bias ? ctx.input(2).data<float>() : nullptr,
                              attrs.activation == attrs::FusedActivation::kRelu};
  Product(ctx, attrs.matmul, ctx.output(0), /*accumulate=*/false, epilogue);
  return OkStatus();
}

namespace {

// BiasAdd of a 16-bit x[rows, c] and a float32 or like-typed bias[c] (Keras's mixed Dense
// layer adds its float32 bias to 16-bit products): round16(float(x) + float(bias)), the sum
// in float as the float32 kernel takes it (one rounding), then one rounding to x's type.
void BiasAdd16(const Tensor& x, const Tensor& bias, int64_t c, const Tensor& out) {
  std::vector<float> widened;
  const float* b = nullptr;
  if (bias.dtype() == DType::kFloat32) {
    b = bias.data<float>();
  } else {
    widened.resize(static_cast<size_t>(c));
    WidenToFloat(bias.dtype(), static_cast<const uint16_t*>(bias.raw_data()), widened.data(), c);
    b = widened.data();
  }
  Elementwise16<1>({&x}, out, c, [b](const float* const* in, float* y, int64_t col, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] = in[0][j] + b[col + j];
  });
}

}  // namespace

Status BiasAdd(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& bias = ctx.input(1);
  const int64_t c = bias.num_elements();
  const int64_t rows = c == 0 ? 0 : x.num_elements() / c;
  if (Is16BitFloat(x.dtype())) {
    BiasAdd16(x, bias, c, ctx.output(0));
    return OkStatus();
  }
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

void ClipValues(const attrs::ClipByValue& clip, const float* x, float* y, int64_t n) {
  // Comparisons, not std::clamp/fmin: a NaN fails both and stays NaN (as on the GPU).
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v < clip.min ? clip.min : v > clip.max ? clip.max : v;
  }
}

Status ClipByValue(const KernelContext& ctx) {
  ClipValues(ctx.attr<attrs::ClipByValue>(), ctx.input(0).data<float>(),
             ctx.output(0).data<float>(), ctx.input(0).num_elements());
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

constexpr int64_t kSumBlock = 256;  // columns summed at once

// Sum of a [rows, cols] block along rows, accumulated in double per column so that long
// batches do not lose the small terms (the reduction feeds gradients and losses), in row
// order. row_of(i, c0, width) gives the floats of row i, columns [c0, c0 + width), width <=
// kSumBlock.
template <typename RowOf>
void SumRowsOf(const RowOf& row_of, int64_t rows, int64_t cols, float* out, double divisor) {
  double acc[kSumBlock];
  for (int64_t c0 = 0; c0 < cols; c0 += kSumBlock) {
    const int64_t width = std::min(kSumBlock, cols - c0);
    for (int64_t j = 0; j < width; ++j) acc[j] = 0;
    for (int64_t i = 0; i < rows; ++i) {
      const float* row = row_of(i, c0, width);
      for (int64_t j = 0; j < width; ++j) acc[j] += row[j];
    }
    for (int64_t j = 0; j < width; ++j) out[c0 + j] = static_cast<float>(acc[j] / divisor);
  }
}

// The sums of the `cols` columns of x[rows, ...] whose rows are `stride` floats apart.
void SumRows(const float* x, int64_t rows, int64_t stride, int64_t cols, float* out,
             double divisor) {
  SumRowsOf([x, stride](int64_t i, int64_t c0, int64_t) { return x + i * stride + c0; }, rows,
            cols, out, divisor);
}

// The sums of a 16-bit x (mixed precision's bias gradients), into float32: SumRows's, each
// block of a row widened to float first (exact), so for cols > 1 they are the bits of the
// float32 kernel on Cast(x, float32). One column (everything, or x[rows, 1]) is summed in row
// order too, in blocks of rows: the same sums as SumRowsOf's, one call per block.
void SumRows16(const Tensor& x, int64_t rows, int64_t cols, float* out, double divisor) {
  const uint16_t* bits = static_cast<const uint16_t*>(x.raw_data());
  float block[k16BitBlock];
  if (cols == 1) {
    double sum = 0;
    for (int64_t i0 = 0; i0 < rows; i0 += k16BitBlock) {
      const int64_t size = std::min(k16BitBlock, rows - i0);
      WidenToFloat(x.dtype(), bits + i0, block, size);
      for (int64_t j = 0; j < size; ++j) sum += block[j];
    }
    out[0] = static_cast<float>(sum / divisor);
    return;
  }
  SumRowsOf(
      [&](int64_t i, int64_t c0, int64_t width) -> const float* {
        WidenToFloat(x.dtype(), bits + i * cols + c0, block, width);
        return block;
      },
      rows, cols, out, divisor);
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
  if (Is16BitFloat(x.dtype())) {
    SumRows16(x, rows, cols, out, divisor);
    return OkStatus();
  }
  if (cols == 1) {
    const double sum = Eigen::Map<const Eigen::ArrayXf>(x.data<float>(), rows).cast<double>().sum();
    out[0] = static_cast<float>(sum / divisor);
    return OkStatus();
  }
  // Split by columns over the call's intra-op threads: each column is summed in row order
  // whoever sums it, so the bits do not depend on the split.
  const float* in = x.data<float>();
  const int64_t min_columns = std::max<int64_t>(16, kMinSplitElements / std::max<int64_t>(rows, 1));
  ParallelRanges(out, cols, min_columns, [=](int64_t begin, int64_t end) {
    SumRows(in + begin, rows, cols, end - begin, out + begin, divisor);
  });
  return OkStatus();
}

}  // namespace

Status ReduceSum(const KernelContext& ctx) { return Reduce(ctx, /*mean=*/false); }
Status ReduceMean(const KernelContext& ctx) { return Reduce(ctx, /*mean=*/true); }

}  // namespace tower::cpu
