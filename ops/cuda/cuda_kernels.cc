// The CUDA kernels of every op but the CPU-only ones (Cast): MatMul on cuBLAS, the rest on
// the launchers of ops/cuda/*.cu. Each kernel makes its device's CUDA ordinal current,
// enqueues its work on the logical device's stream and returns without waiting, except the
// cross-entropy ops, which must read back whether the labels were valid. Errors come back as
// Status, never as an abort, naming the failing call, file:line and the device.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "device/cuda/cuda_status.h"
#include "ops/cuda/cublas_handle.h"
#include "ops/cuda/cublas_status.h"
#include "ops/cuda/launchers.h"
#include "ops/kernel.h"
#include "ops/kernel_registry.h"
#include "ops/op_attrs.h"
#include "ops/op_names.h"

// Makes the kernel's GPU the calling thread's current CUDA device until the end of the
// enclosing scope (the previous one is restored).
#define TOWER_GPU_DEVICE_SCOPE(ctx)                                   \
  ScopedCudaDevice tower_gpu_device_((ctx).device->physical().index); \
  TOWER_RETURN_IF_ERROR(tower_gpu_device_.status())

// Returns a launcher's or a CUDA call's error, naming the call, file:line and the device.
#define TOWER_GPU_RETURN_IF_ERROR(ctx, statement) \
  TOWER_CUDA_RETURN_IF_ERROR(statement, (ctx).device->full_name())

namespace tower {
namespace {

using gpu::RowIndex;

cudaStream_t StreamOf(const KernelContext& ctx) {
  return static_cast<cudaStream_t>(ctx.device->stream().native_handle());
}

const float* In(const KernelContext& ctx, size_t i) { return ctx.input(i).data<float>(); }
float* InOut(const KernelContext& ctx, size_t i) { return ctx.input(i).data<float>(); }
float* Out(const KernelContext& ctx) { return ctx.output(0).data<float>(); }
int64_t Elements(const KernelContext& ctx) { return ctx.output(0).num_elements(); }

// [first dimension, everything else], as the CPU kernels see a batch (ops/cpu/eigen.h).
int64_t Rows(const Tensor& t) { return t.shape().rank() == 0 ? 1 : t.shape().dim(0); }
int64_t Cols(const Tensor& t) { return t.shape().rank() == 0 ? 1 : t.shape().row_size(); }

// Scratch device memory of `count` doubles for one kernel call (an empty handle, no memory,
// for 0), from the device's allocator so that it counts against the device's memory limit.
// It goes back to the allocator when the kernel returns, possibly before the GPU is done
// with it. That is safe for the same reason freeing any tensor is: all work on this device's
// memory is ordered on its stream, so the next user of the memory runs after this kernel.
StatusOr<Tensor> ScratchDoubles(const KernelContext& ctx, int64_t count) {
  if (count == 0) return Tensor();
  return Tensor::Empty(ctx.device, Shape{2 * count}, DType::kInt32);  // the allocator aligns to 256
}

double* Doubles(const Tensor& scratch) { return static_cast<double*>(scratch.raw_data()); }

// These kernels read and write float32. The ops that mixed precision runs in bfloat16 or
// float16 check for float32 or 16-bit inputs only (their CPU kernels take both), so those
// kernels refuse another dtype here by name, rather than read its bytes as floats.
Status CheckFloat32Inputs(const KernelContext& ctx, const char* op) {
  for (const Tensor* input : ctx.inputs) {
    if (input->dtype() == DType::kFloat32) continue;
    return UnimplementedError(std::string(op) + ": " + std::string(DTypeName(input->dtype())) +
                              " inputs have no CUDA kernel yet (mixed precision runs on CPU "
                              "replicas)");
  }
  return OkStatus();
}

// ---- math ----------------------------------------------------------------------------------

// c = op(a)·op(b), or c += it (accumulate: cuBLAS's beta = 1).
Status Product(const KernelContext& ctx, const attrs::MatMul& attrs, const Tensor& c,
               bool accumulate) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const int64_t m = c.shape().dim(0);
  const int64_t n = c.shape().dim(1);
  const int64_t k = attrs.transpose_a ? a.shape().dim(0) : a.shape().dim(1);
  if (m == 0 || n == 0) return OkStatus();
  if (k == 0 && accumulate) return OkStatus();  // adds an empty sum
  TOWER_GPU_DEVICE_SCOPE(ctx);
  const cudaStream_t stream = StreamOf(ctx);
  if (k == 0) {  // an empty sum: cuBLAS would not write C
    TOWER_GPU_RETURN_IF_ERROR(ctx, cudaMemsetAsync(c.raw_data(), 0, c.bytes(), stream));
    return OkStatus();
  }
  TOWER_ASSIGN_OR_RETURN(cublasHandle_t handle, CublasHandleFor(*ctx.device));
  const std::string& where = ctx.device->full_name();
  // cuBLAS is column-major, and a row-major buffer read column-major is the transpose. So
  // row-major C[m, n] = op(A)·op(B) is column-major Cᵀ[n, m] = op(B)ᵀ·op(A)ᵀ: B comes
  // first, each operand keeps its own transpose flag, and each leading dimension is the row
  // length of the row-major matrix as stored.
  const float alpha = 1.0f;
  const float beta = accumulate ? 1.0f : 0.0f;
  const cublasOperation_t op_a = attrs.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = attrs.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  TOWER_CUBLAS_RETURN_IF_ERROR(
      cublasSgemm_64(handle, op_b, op_a, n, m, k, &alpha, b.data<float>(), b.shape().dim(1),
                     a.data<float>(), a.shape().dim(1), &beta, c.data<float>(), n),
      where);
  return OkStatus();
}

Status MatMul(const KernelContext& ctx) {
  TOWER_RETURN_IF_ERROR(CheckFloat32Inputs(ctx, "MatMul"));
  return Product(ctx, ctx.attr<attrs::MatMul>(), ctx.output(0), /*accumulate=*/false);
}

// In place: inputs a, b and the sum.
Status MatMulAdd(const KernelContext& ctx) {
  TOWER_RETURN_IF_ERROR(CheckFloat32Inputs(ctx, "MatMulAdd"));
  return Product(ctx, ctx.attr<attrs::MatMul>(), ctx.input(2), /*accumulate=*/true);
}

// Inputs x, weight and, where attrs.has_bias, the bias. cuBLAS's product, then the bias and
// Relu launchers in place on the product (each element read and written by one thread), on
// the same stream: the three ops' kernels, so their bits.
Status FusedMatMul(const KernelContext& ctx) {
  TOWER_RETURN_IF_ERROR(CheckFloat32Inputs(ctx, "FusedMatMul"));
  const auto& attrs = ctx.attr<attrs::FusedMatMul>();
  const Tensor& out = ctx.output(0);
  TOWER_RETURN_IF_ERROR(Product(ctx, attrs.matmul, out, /*accumulate=*/false));
  const int64_t rows = out.shape().dim(0);
  const int64_t cols = out.shape().dim(1);
  if (rows * cols == 0) return OkStatus();
  TOWER_GPU_DEVICE_SCOPE(ctx);
  if (attrs.has_bias) {
    TOWER_GPU_RETURN_IF_ERROR(ctx, gpu::LaunchBiasAdd(Out(ctx), In(ctx, 2), Out(ctx), rows, cols,
                                                      StreamOf(ctx)));
  }
  if (attrs.activation == attrs::FusedActivation::kRelu) {
    TOWER_GPU_RETURN_IF_ERROR(ctx,
                              gpu::LaunchRelu(Out(ctx), Out(ctx), rows * cols, StreamOf(ctx)));
  }
  return OkStatus();
}

Status BiasAdd(const KernelContext& ctx) {
  TOWER_RETURN_IF_ERROR(CheckFloat32Inputs(ctx, "BiasAdd"));
  const int64_t c = ctx.input(1).num_elements();
  const int64_t rows = c == 0 ? 0 : ctx.input(0).num_elements() / c;
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchBiasAdd(In(ctx, 0), In(ctx, 1), Out(ctx), rows, c, StreamOf(ctx)));
  return OkStatus();
}

Status Add(const KernelContext& ctx) {
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchAdd(In(ctx, 0), In(ctx, 1), Out(ctx), Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status Sub(const KernelContext& ctx) {
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchSub(In(ctx, 0), In(ctx, 1), Out(ctx), Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status Mul(const KernelContext& ctx) {
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchMul(In(ctx, 0), In(ctx, 1), Out(ctx), Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status Scale(const KernelContext& ctx) {
  const float alpha = ctx.attr<attrs::Scalar>().value;
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchScale(In(ctx, 0), alpha, Out(ctx), Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status ClipByValue(const KernelContext& ctx) {
  const auto& clip = ctx.attr<attrs::ClipByValue>();
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(ctx, gpu::LaunchClipByValue(In(ctx, 0), clip.min, clip.max, Out(ctx),
                                                        Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status Axpy(const KernelContext& ctx) {
  const float alpha = ctx.attr<attrs::Scalar>().value;
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchAxpy(alpha, In(ctx, 0), In(ctx, 1), Out(ctx), Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status AddN(const KernelContext& ctx) {
  std::vector<const float*> inputs(ctx.inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = In(ctx, i);
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(ctx, gpu::LaunchAddN(inputs.data(), static_cast<int64_t>(inputs.size()),
                                                 Out(ctx), Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status Reduce(const KernelContext& ctx, bool mean) {
  TOWER_RETURN_IF_ERROR(CheckFloat32Inputs(ctx, mean ? "ReduceMean" : "ReduceSum"));
  const Tensor& x = ctx.input(0);
  const bool all =
      ctx.attr<attrs::Reduce>().axis == attrs::ReduceAxis::kAll || x.shape().rank() == 0;
  const int64_t rows = all ? x.num_elements() : Rows(x);
  const int64_t cols = all ? 1 : Cols(x);
  TOWER_GPU_DEVICE_SCOPE(ctx);
  const cudaStream_t stream = StreamOf(ctx);
  if (rows == 0) {  // the sum of nothing is 0, its mean NaN
    const float empty = mean ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
    TOWER_GPU_RETURN_IF_ERROR(ctx, gpu::LaunchFill(Out(ctx), empty, cols, stream));
    return OkStatus();
  }
  const double divisor = mean ? static_cast<double>(rows) : 1.0;
  if (cols == 1) {
    TOWER_ASSIGN_OR_RETURN(Tensor scratch, ScratchDoubles(ctx, gpu::SumAllWorkspaceDoubles(rows)));
    TOWER_GPU_RETURN_IF_ERROR(
        ctx, gpu::LaunchSumAll(In(ctx, 0), rows, divisor, Doubles(scratch), Out(ctx), stream));
    return OkStatus();
  }
  TOWER_ASSIGN_OR_RETURN(Tensor scratch,
                         ScratchDoubles(ctx, gpu::SumRowsWorkspaceDoubles(rows, cols)));
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchSumRows(In(ctx, 0), rows, cols, divisor, Doubles(scratch), Out(ctx), stream));
  return OkStatus();
}

Status ReduceSum(const KernelContext& ctx) { return Reduce(ctx, /*mean=*/false); }
Status ReduceMean(const KernelContext& ctx) { return Reduce(ctx, /*mean=*/true); }

// ---- nn ------------------------------------------------------------------------------------

Status Relu(const KernelContext& ctx) {
  TOWER_RETURN_IF_ERROR(CheckFloat32Inputs(ctx, "Relu"));
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(ctx,
                            gpu::LaunchRelu(In(ctx, 0), Out(ctx), Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status ReluGrad(const KernelContext& ctx) {  // inputs: dy, x
  TOWER_RETURN_IF_ERROR(CheckFloat32Inputs(ctx, "ReluGrad"));
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchReluGrad(In(ctx, 0), In(ctx, 1), Out(ctx), Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status Sigmoid(const KernelContext& ctx) {
  TOWER_RETURN_IF_ERROR(CheckFloat32Inputs(ctx, "Sigmoid"));
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(ctx,
                            gpu::LaunchSigmoid(In(ctx, 0), Out(ctx), Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status SigmoidGrad(const KernelContext& ctx) {  // inputs: dy, y
  TOWER_RETURN_IF_ERROR(CheckFloat32Inputs(ctx, "SigmoidGrad"));
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchSigmoidGrad(In(ctx, 0), In(ctx, 1), Out(ctx), Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status Tanh(const KernelContext& ctx) {
  TOWER_RETURN_IF_ERROR(CheckFloat32Inputs(ctx, "Tanh"));
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(ctx,
                            gpu::LaunchTanh(In(ctx, 0), Out(ctx), Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status TanhGrad(const KernelContext& ctx) {  // inputs: dy, y
  TOWER_RETURN_IF_ERROR(CheckFloat32Inputs(ctx, "TanhGrad"));
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchTanhGrad(In(ctx, 0), In(ctx, 1), Out(ctx), Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status Softmax(const KernelContext& ctx) {
  const Tensor& logits = ctx.input(0);
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchSoftmax(In(ctx, 0), Out(ctx), Rows(logits), Cols(logits), StreamOf(ctx)));
  return OkStatus();
}

Status SoftmaxGrad(const KernelContext& ctx) {  // inputs: dy, y
  const Tensor& y = ctx.input(1);
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(ctx, gpu::LaunchSoftmaxGrad(In(ctx, 0), In(ctx, 1), Out(ctx), Rows(y),
                                                        Cols(y), StreamOf(ctx)));
  return OkStatus();
}

Status MeanSquaredError(const KernelContext& ctx) {  // inputs: pred, target -> scalar
  const int64_t n = ctx.input(0).num_elements();
  const double scale = ctx.attr<attrs::Loss>().scale;
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_ASSIGN_OR_RETURN(Tensor scratch, ScratchDoubles(ctx, gpu::SumAllWorkspaceDoubles(n)));
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchSquaredErrorSum(In(ctx, 0), In(ctx, 1), n, scale, Doubles(scratch), Out(ctx),
                                      StreamOf(ctx)));
  return OkStatus();
}

Status MeanSquaredErrorGrad(const KernelContext& ctx) {  // inputs: pred, target
  const float factor = 2.0f * ctx.attr<attrs::Loss>().scale;
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchMeanSquaredErrorGrad(In(ctx, 0), In(ctx, 1), factor, Out(ctx), Elements(ctx),
                                           StreamOf(ctx)));
  return OkStatus();
}

// The error of the CPU kernel for the lowest row whose label the GPU kernel found outside
// [0, c), if any. Waits for the stream: the op's Status must say whether the labels were
// valid. (The CPU stops at that row; the GPU went through every row, so it finds the same.)
Status CheckLabels(const KernelContext& ctx, const RowIndex* first_bad_row_on_device, int64_t c) {
  const cudaStream_t stream = StreamOf(ctx);
  RowIndex first_bad_row = 0;
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, cudaMemcpyAsync(&first_bad_row, first_bad_row_on_device, sizeof(first_bad_row),
                           cudaMemcpyDeviceToHost, stream));
  TOWER_GPU_RETURN_IF_ERROR(ctx, cudaStreamSynchronize(stream));
  if (first_bad_row == ~RowIndex{0}) return OkStatus();
  int32_t label = 0;
  const int32_t* labels = ctx.input(1).data<int32_t>();
  TOWER_GPU_RETURN_IF_ERROR(ctx, cudaMemcpyAsync(&label, labels + first_bad_row, sizeof(label),
                                                 cudaMemcpyDeviceToHost, stream));
  TOWER_GPU_RETURN_IF_ERROR(ctx, cudaStreamSynchronize(stream));
  return InvalidArgumentError("label " + std::to_string(label) + " at row " +
                              std::to_string(first_bad_row) + " is outside [0, " +
                              std::to_string(c) + ")");
}

// logits[n, c], labels[n] -> the scalar loss, or with `grad` its gradient [n, c].
Status CrossEntropy(const KernelContext& ctx, bool grad) {
  const Tensor& logits = ctx.input(0);
  const int32_t* labels = ctx.input(1).data<int32_t>();
  const float scale = ctx.attr<attrs::Loss>().scale;
  const bool labels_checked = ctx.attr<attrs::Loss>().labels_checked;
  const int64_t n = Rows(logits);
  const int64_t c = Cols(logits);
  TOWER_GPU_DEVICE_SCOPE(ctx);
  const cudaStream_t stream = StreamOf(ctx);
  if (n == 0) {  // no rows: a zero loss, an empty gradient
    if (!grad) TOWER_GPU_RETURN_IF_ERROR(ctx, gpu::LaunchFill(Out(ctx), 0.0f, 1, stream));
    return OkStatus();
  }
  // Scratch: [the first bad row (8 bytes)][the loss: n row losses, then the partial sums].
  const int64_t partials = grad ? 0 : gpu::SumAllWorkspaceDoubles(n);
  TOWER_ASSIGN_OR_RETURN(Tensor scratch, ScratchDoubles(ctx, 1 + (grad ? 0 : n + partials)));
  auto* first_bad_row = reinterpret_cast<RowIndex*>(Doubles(scratch));
  TOWER_GPU_RETURN_IF_ERROR(ctx,
                            cudaMemsetAsync(first_bad_row, 0xff, sizeof(*first_bad_row), stream));
  if (grad) {
    TOWER_GPU_RETURN_IF_ERROR(ctx, gpu::LaunchCrossEntropyGrad(In(ctx, 0), labels, n, c, scale,
                                                               Out(ctx), first_bad_row, stream));
  } else {
    double* row_loss = Doubles(scratch) + 1;
    TOWER_GPU_RETURN_IF_ERROR(ctx, gpu::LaunchCrossEntropyRowLosses(
                                       In(ctx, 0), labels, n, c, row_loss, first_bad_row, stream));
    TOWER_GPU_RETURN_IF_ERROR(
        ctx, gpu::LaunchSumDoubles(row_loss, n, scale, row_loss + n, Out(ctx), stream));
  }
  if (labels_checked) return OkStatus();  // no wait for the device's own check
  return CheckLabels(ctx, first_bad_row, c);
}

Status SparseSoftmaxCrossEntropy(const KernelContext& ctx) {
  return CrossEntropy(ctx, /*grad=*/false);
}

Status SparseSoftmaxCrossEntropyGrad(const KernelContext& ctx) {
  return CrossEntropy(ctx, /*grad=*/true);
}

// ---- array ---------------------------------------------------------------------------------

Status Fill(const KernelContext& ctx) {
  const float value = ctx.attr<attrs::Scalar>().value;
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(ctx, gpu::LaunchFill(Out(ctx), value, Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

// Along the first dimension: the inputs' bytes one after another (any dtype).
Status Concat(const KernelContext& ctx) {
  char* out = static_cast<char*>(ctx.output(0).raw_data());
  TOWER_GPU_DEVICE_SCOPE(ctx);
  const cudaStream_t stream = StreamOf(ctx);
  for (const Tensor* input : ctx.inputs) {
    if (input->bytes() > 0) {
      TOWER_GPU_RETURN_IF_ERROR(ctx, cudaMemcpyAsync(out, input->raw_data(), input->bytes(),
                                                     cudaMemcpyDeviceToDevice, stream));
    }
    out += input->bytes();
  }
  return OkStatus();
}

Status RandomUniform(const KernelContext& ctx) {
  const auto& random = ctx.attr<attrs::Random>();
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(ctx, gpu::LaunchRandomUniform(random.seed, random.a, random.b, Out(ctx),
                                                          Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

Status RandomNormal(const KernelContext& ctx) {
  const auto& random = ctx.attr<attrs::Random>();
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(ctx, gpu::LaunchRandomNormal(random.seed, random.a, random.b, Out(ctx),
                                                         Elements(ctx), StreamOf(ctx)));
  return OkStatus();
}

// ---- training ------------------------------------------------------------------------------

// In place: inputs var, grad (momentum 0) or var, velocity, grad.
Status ApplySgd(const KernelContext& ctx) {
  const auto& sgd = ctx.attr<attrs::Sgd>();
  const int64_t n = ctx.input(0).num_elements();
  TOWER_GPU_DEVICE_SCOPE(ctx);
  const cudaStream_t stream = StreamOf(ctx);
  if (ctx.inputs.size() == 2) {
    TOWER_GPU_RETURN_IF_ERROR(
        ctx, gpu::LaunchApplySgd(InOut(ctx, 0), In(ctx, 1), sgd.learning_rate, n, stream));
    return OkStatus();
  }
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchApplySgdMomentum(InOut(ctx, 0), InOut(ctx, 1), In(ctx, 2), sgd.learning_rate,
                                       sgd.momentum, sgd.nesterov, n, stream));
  return OkStatus();
}

// In place: inputs var, m, v, grad.
Status ApplyAdam(const KernelContext& ctx) {
  const auto& adam = ctx.attr<attrs::Adam>();
  const int64_t n = ctx.input(0).num_elements();
  TOWER_GPU_DEVICE_SCOPE(ctx);
  TOWER_GPU_RETURN_IF_ERROR(
      ctx, gpu::LaunchApplyAdam(InOut(ctx, 0), InOut(ctx, 1), InOut(ctx, 2), In(ctx, 3), adam.alpha,
                                adam.beta1, adam.beta2, adam.epsilon, adam.decay, n,
                                StreamOf(ctx)));
  return OkStatus();
}

struct NamedKernel {
  const char* op;
  KernelFn fn;
};

// Every op of ops/op_names.h except the CPU-only ones (op_names::IsCpuOnly).
constexpr NamedKernel kKernels[] = {
    {op_names::kMatMul, MatMul},
    {op_names::kMatMulAdd, MatMulAdd},
    {op_names::kFusedMatMul, FusedMatMul},
    {op_names::kBiasAdd, BiasAdd},
    {op_names::kAdd, Add},
    {op_names::kSub, Sub},
    {op_names::kMul, Mul},
    {op_names::kScale, Scale},
    {op_names::kClipByValue, ClipByValue},
    {op_names::kAxpy, Axpy},
    {op_names::kAddN, AddN},
    {op_names::kReduceSum, ReduceSum},
    {op_names::kReduceMean, ReduceMean},
    {op_names::kRelu, Relu},
    {op_names::kReluGrad, ReluGrad},
    {op_names::kSigmoid, Sigmoid},
    {op_names::kSigmoidGrad, SigmoidGrad},
    {op_names::kTanh, Tanh},
    {op_names::kTanhGrad, TanhGrad},
    {op_names::kSoftmax, Softmax},
    {op_names::kSoftmaxGrad, SoftmaxGrad},
    {op_names::kMeanSquaredError, MeanSquaredError},
    {op_names::kMeanSquaredErrorGrad, MeanSquaredErrorGrad},
    {op_names::kSparseSoftmaxCrossEntropy, SparseSoftmaxCrossEntropy},
    {op_names::kSparseSoftmaxCrossEntropyGrad, SparseSoftmaxCrossEntropyGrad},
    {op_names::kFill, Fill},
    {op_names::kConcat, Concat},
    {op_names::kRandomUniform, RandomUniform},
    {op_names::kRandomNormal, RandomNormal},
    {op_names::kApplySgd, ApplySgd},
    {op_names::kApplyAdam, ApplyAdam},
};

}  // namespace

void RegisterGpuKernels(KernelRegistry& registry) {
  for (const NamedKernel& kernel : kKernels) {
    registry.Register(kernel.op, "GPU", kCudaPlatform, kernel.fn);
  }
}

}  // namespace tower
