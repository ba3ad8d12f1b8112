// Elementwise kernels (math and activation ops, Fill, the MSE gradient): one thread per
// element, or per four where the tensors are 16-byte aligned, in grid-stride loops.
// Memory-bound; the arithmetic rounds as the CPU kernels do (products that feed a sum are
// rounded with __fmul_rn rather than fused).
#include <cstdint>
#include <initializer_list>

#include "device/cuda/kernel_launch.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/launchers.h"

namespace tower::gpu {
namespace {

// out[i] = op(a[i], b[i])
template <typename Op>
__global__ void BinaryKernel(const float* a, const float* b, float* out, int64_t n, Op op) {
  for (int64_t i = GridThread(); i < n; i += GridThreads()) out[i] = op(a[i], b[i]);
}

// out[i] = op(x[i])
template <typename Op>
__global__ void UnaryKernel(const float* x, float* out, int64_t n, Op op) {
  for (int64_t i = GridThread(); i < n; i += GridThreads()) out[i] = op(x[i]);
}

// The same four elements at a time: one 16-byte load per input and one store per output
// instead of four each (the scalar kernels reached 42 % of an H200's memory bandwidth on a
// 4096×4096 ReLU; 2026-11-26). The first n − n % 4 elements so; the last n % 4 by the first
// threads, one each. Every element gets the scalar kernel's arithmetic: the same bits.
// Only for pointers 16-byte aligned (Aligned4), which tensors from the allocator are.
template <typename Op>
__global__ void BinaryKernel4(const float* a, const float* b, float* out, int64_t n, Op op) {
  const int64_t n4 = n / 4;
  const auto* a4 = reinterpret_cast<const float4*>(a);
  const auto* b4 = reinterpret_cast<const float4*>(b);
  auto* out4 = reinterpret_cast<float4*>(out);
  for (int64_t i = GridThread(); i < n4; i += GridThreads()) {
    const float4 x = a4[i];
    const float4 y = b4[i];
    out4[i] = make_float4(op(x.x, y.x), op(x.y, y.y), op(x.z, y.z), op(x.w, y.w));
  }
  const int64_t tail = n4 * 4 + GridThread();
  if (tail < n) out[tail] = op(a[tail], b[tail]);
}

template <typename Op>
__global__ void UnaryKernel4(const float* x, float* out, int64_t n, Op op) {
  const int64_t n4 = n / 4;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  auto* out4 = reinterpret_cast<float4*>(out);
  for (int64_t i = GridThread(); i < n4; i += GridThreads()) {
    const float4 v = x4[i];
    out4[i] = make_float4(op(v.x), op(v.y), op(v.z), op(v.w));
  }
  const int64_t tail = n4 * 4 + GridThread();
  if (tail < n) out[tail] = op(x[tail]);
}

// Whether every pointer may be read or written as float4.
bool Aligned4(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % alignof(float4) != 0) return false;
  }
  return true;
}

// Threads for n elements taken four at a time (at least the n % 4 of the tail).
unsigned BlocksFor4(int64_t n) { return BlocksFor(n / 4 > n % 4 ? n / 4 : n % 4); }

template <typename Op>
cudaError_t Binary(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream,
                   Op op) {
  if (n == 0) return cudaSuccess;
  if (Aligned4({a, b, out})) {
    return TOWER_LAUNCH_KERNEL(BinaryKernel4<Op>, BlocksFor4(n), kThreads, 0, stream, a, b, out,
                               n, op);
  }
  return TOWER_LAUNCH_KERNEL(BinaryKernel<Op>, BlocksFor(n), kThreads, 0, stream, a, b, out, n, op);
}

template <typename Op>
cudaError_t Unary(const float* x, float* out, int64_t n, cudaStream_t stream, Op op) {
  if (n == 0) return cudaSuccess;
  if (Aligned4({x, out})) {
    return TOWER_LAUNCH_KERNEL(UnaryKernel4<Op>, BlocksFor4(n), kThreads, 0, stream, x, out, n,
                               op);
  }
  return TOWER_LAUNCH_KERNEL(UnaryKernel<Op>, BlocksFor(n), kThreads, 0, stream, x, out, n, op);
}

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct SubOp {
  __device__ float operator()(float a, float b) const { return a - b; }
};
struct MulOp {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct ScaleOp {
  float alpha;
  __device__ float operator()(float x) const { return x * alpha; }
};
struct ClipOp {
  float min, max;
  // Comparisons, not fminf/fmaxf (which drop a NaN): a NaN stays NaN, as on the CPU.
  __device__ float operator()(float x) const { return x < min ? min : x > max ? max : x; }
};
struct AxpyOp {
  float alpha;
  __device__ float operator()(float x, float y) const { return __fmul_rn(x, alpha) + y; }
};
struct ReluOp {
  __device__ float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct ReluGradOp {  // (dy, x)
  __device__ float operator()(float dy, float x) const { return x > 0.0f ? dy : 0.0f; }
};
struct SigmoidOp {
  // expf(−x) overflows to inf for x < −88, giving 0: the limit, not NaN.
  __device__ float operator()(float x) const { return 1.0f / (1.0f + expf(-x)); }
};
struct SigmoidGradOp {  // (dy, y)
  __device__ float operator()(float dy, float y) const { return dy * y * (1.0f - y); }
};
struct TanhOp {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct TanhGradOp {  // (dy, y)
  __device__ float operator()(float dy, float y) const { return dy * (1.0f - __fmul_rn(y, y)); }
};
struct MseGradOp {  // (pred, target)
  float factor;
  __device__ float operator()(float p, float t) const { return (p - t) * factor; }
};

// At most this many inputs per AddN launch: their pointers travel as a kernel argument.
constexpr int kAddNPerLaunch = 8;
struct AddNInputs {
  const float* pointers[kAddNPerLaunch];
  int count;
};

// out[i] = (accumulate ? out[i] : 0) + inputs[0][i] + ..., in order; the first launch of a
// sum starts from inputs[0][i] itself, exactly as the CPU's `out = x0; out += x1; ...`.
__global__ void AddNKernel(AddNInputs inputs, bool accumulate, float* out, int64_t n) {
  for (int64_t i = GridThread(); i < n; i += GridThreads()) {
    int first = 0;
    float sum;
    if (accumulate) {
      sum = out[i];
    } else {
      sum = inputs.pointers[0][i];
      first = 1;
    }
    for (int k = first; k < inputs.count; ++k) sum += inputs.pointers[k][i];
    out[i] = sum;
  }
}

__global__ void BiasAddKernel(const float* x, const float* bias, float* out, int64_t n, int64_t c) {
  for (int64_t i = GridThread(); i < n; i += GridThreads()) out[i] = x[i] + bias[i % c];
}

// Four columns at a time when c % 4 == 0 (a group never crosses a row) and every pointer is
// 16-byte aligned: one column index per four elements.
__global__ void BiasAddKernel4(const float* x, const float* bias, float* out, int64_t n,
                               int64_t c) {
  const int64_t n4 = n / 4;
  const int64_t c4 = c / 4;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  const auto* bias4 = reinterpret_cast<const float4*>(bias);
  auto* out4 = reinterpret_cast<float4*>(out);
  for (int64_t i = GridThread(); i < n4; i += GridThreads()) {
    const float4 v = x4[i];
    const float4 b = bias4[i % c4];
    out4[i] = make_float4(v.x + b.x, v.y + b.y, v.z + b.z, v.w + b.w);
  }
}

__global__ void FillKernel(float* out, float value, int64_t n) {
  for (int64_t i = GridThread(); i < n; i += GridThreads()) out[i] = value;
}

}  // namespace

cudaError_t LaunchAdd(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  return Binary(a, b, out, n, stream, AddOp());
}

cudaError_t LaunchSub(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  return Binary(a, b, out, n, stream, SubOp());
}

cudaError_t LaunchMul(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  return Binary(a, b, out, n, stream, MulOp());
}

cudaError_t LaunchScale(const float* x, float alpha, float* out, int64_t n, cudaStream_t stream) {
  return Unary(x, out, n, stream, ScaleOp{alpha});
}

cudaError_t LaunchClipByValue(const float* x, float min, float max, float* out, int64_t n,
                              cudaStream_t stream) {
  return Unary(x, out, n, stream, ClipOp{min, max});
}

cudaError_t LaunchAxpy(float alpha, const float* x, const float* y, float* out, int64_t n,
                       cudaStream_t stream) {
  return Binary(x, y, out, n, stream, AxpyOp{alpha});
}

cudaError_t LaunchAddN(const float* const* inputs, int64_t count, float* out, int64_t n,
                       cudaStream_t stream) {
  if (n == 0 || count < 1) return cudaSuccess;
  for (int64_t begin = 0; begin < count; begin += kAddNPerLaunch) {
    AddNInputs batch{};
    const int64_t left = count - begin;
    batch.count = static_cast<int>(left < kAddNPerLaunch ? left : kAddNPerLaunch);
    for (int k = 0; k < batch.count; ++k) batch.pointers[k] = inputs[begin + k];
    const cudaError_t error = TOWER_LAUNCH_KERNEL(AddNKernel, BlocksFor(n), kThreads, 0, stream,
                                                  batch, /*accumulate=*/begin > 0, out, n);
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

cudaError_t LaunchBiasAdd(const float* x, const float* bias, float* out, int64_t rows, int64_t c,
                          cudaStream_t stream) {
  const int64_t n = rows * c;
  if (n == 0) return cudaSuccess;
  if (c % 4 == 0 && Aligned4({x, bias, out})) {
    return TOWER_LAUNCH_KERNEL(BiasAddKernel4, BlocksFor(n / 4), kThreads, 0, stream, x, bias,
                               out, n, c);
  }
  return TOWER_LAUNCH_KERNEL(BiasAddKernel, BlocksFor(n), kThreads, 0, stream, x, bias, out, n, c);
}

cudaError_t LaunchFill(float* out, float value, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return TOWER_LAUNCH_KERNEL(FillKernel, BlocksFor(n), kThreads, 0, stream, out, value, n);
}

cudaError_t LaunchRelu(const float* x, float* y, int64_t n, cudaStream_t stream) {
  return Unary(x, y, n, stream, ReluOp());
}

cudaError_t LaunchReluGrad(const float* dy, const float* x, float* dx, int64_t n,
                           cudaStream_t stream) {
  return Binary(dy, x, dx, n, stream, ReluGradOp());
}

cudaError_t LaunchSigmoid(const float* x, float* y, int64_t n, cudaStream_t stream) {
  return Unary(x, y, n, stream, SigmoidOp());
}

cudaError_t LaunchSigmoidGrad(const float* dy, const float* y, float* dx, int64_t n,
                              cudaStream_t stream) {
  return Binary(dy, y, dx, n, stream, SigmoidGradOp());
}

cudaError_t LaunchTanh(const float* x, float* y, int64_t n, cudaStream_t stream) {
  return Unary(x, y, n, stream, TanhOp());
}

cudaError_t LaunchTanhGrad(const float* dy, const float* y, float* dx, int64_t n,
                           cudaStream_t stream) {
  return Binary(dy, y, dx, n, stream, TanhGradOp());
}

cudaError_t LaunchMeanSquaredErrorGrad(const float* pred, const float* target, float factor,
                                       float* grad, int64_t n, cudaStream_t stream) {
  return Binary(pred, target, grad, n, stream, MseGradOp{factor});
}

}  // namespace tower::gpu
