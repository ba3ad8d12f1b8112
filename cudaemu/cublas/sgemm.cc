// cublasSgemm: the argument checks of the cuBLAS documentation, then the product as work on
// the handle's stream.
//
// The product: op(A) and op(B) are packed (and rounded to TF32 or FP16 when the math mode
// lets cuBLAS use tensor cores), then every C(i, j) accumulates op(A)(i, l) * op(B)(l, j)
// in float with fma in l order from 0, and becomes alpha * sum + beta * C(i, j), or
// alpha * sum when beta == 0 (C is not read: a NaN there does not propagate). With
// alpha == 0 or k == 0, A and B are not read and C = beta * C (0 when beta == 0).
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cudaemu/cublas/handle.h"
#include "cudaemu/runtime/internal.h"

namespace cudaemu::cublas {
namespace {

enum class Rounding { kNone, kTf32, kFp16 };

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

float FromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// Keeps 10 explicit mantissa bits, rounding to nearest even (values past TF32's largest
// finite value round to infinity, as in any IEEE format).
float RoundMantissaTo10Bits(float x) {
  uint32_t bits = Bits(x);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;  // inf, NaN
  bits += 0xfffu + ((bits >> 13) & 1u);
  bits &= ~0x1fffu;
  return FromBits(bits);
}

// IEEE binary16 (round to nearest even, with its subnormals and overflow to infinity).
float RoundToHalf(float x) {
  if (!std::isfinite(x)) return x;
  if (std::fabs(x) < 0x1p-14f) return std::nearbyint(x * 0x1p24f) * 0x1p-24f;
  const float rounded = RoundMantissaTo10Bits(x);
  if (std::fabs(rounded) > 65504.0f) return std::copysign(std::numeric_limits<float>::infinity(), x);
  return rounded;
}

float Round(float x, Rounding rounding) {
  switch (rounding) {
    case Rounding::kNone:
      return x;
    case Rounding::kTf32:
      return RoundMantissaTo10Bits(x);
    case Rounding::kFp16:
      return RoundToHalf(x);
  }
  return x;
}

Rounding RoundingFor(cublasMath_t math, bool tf32_allowed) {
  const int base =
      static_cast<int>(math) & ~static_cast<int>(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  if (base == CUBLAS_TF32_TENSOR_OP_MATH && tf32_allowed) return Rounding::kTf32;
  // Deprecated CUBLAS_TENSOR_OP_MATH: SGEMM uses CUBLAS_COMPUTE_32F_FAST_16F.
  if (base == CUBLAS_TENSOR_OP_MATH) return Rounding::kFp16;
  return Rounding::kNone;
}

// Bytes spanned by a column-major rows x cols matrix with leading dimension ld (0 when
// empty), or false on overflow.
bool SpanBytes(int64_t rows, int64_t cols, int64_t ld, size_t* bytes) {
  if (rows == 0 || cols == 0) {
    *bytes = 0;
    return true;
  }
  int64_t elements;
  if (__builtin_mul_overflow(cols - 1, ld, &elements) ||
      __builtin_add_overflow(elements, rows, &elements) ||
      __builtin_mul_overflow(static_cast<uint64_t>(elements), sizeof(float), bytes)) {
    return false;
  }
  return true;
}

// Whether [ptr, ptr + bytes) is live device memory of `device`, aligned for floats.
bool OnDevice(const void* ptr, size_t bytes, int device) {
  if (bytes == 0) return true;
  if (reinterpret_cast<uintptr_t>(ptr) % alignof(float) != 0) return false;
  return internal::DeviceOf(ptr, bytes) == device;
}

struct Gemm {
  bool trans_a, trans_b;
  int64_t m, n, k;
  float alpha, beta;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  Rounding rounding;
  bool reads_ab;  // alpha != 0 and k > 0
};

// Rows of op(A) per panel: a panel (up to kPanelRows rows of op(A), all k columns) stays in
// cache while it is reused for every column of C.
constexpr int64_t kPanelRows = 64;

// Floats of scratch the product needs: op(A) in panels, then op(B) column-major.
size_t ScratchFloats(const Gemm& g) {
  if (!g.reads_ab) return 0;
  return static_cast<size_t>(g.m * g.k + g.k * g.n);
}

void Run(const Gemm& g, float* scratch) {
  if (!g.reads_ab) {
    for (int64_t j = 0; j < g.n; ++j) {
      float* c = g.c + j * g.ldc;
      for (int64_t i = 0; i < g.m; ++i) c[i] = g.beta == 0.0f ? 0.0f : g.beta * c[i];
    }
    return;
  }
  const int64_t m = g.m, n = g.n, k = g.k;
  // The panel of rows [i0, i0 + rows) of op(A) starts at packed_a + i0 * k and holds
  // element (i0 + r, l) at [l * rows + r].
  float* packed_a = scratch;
  float* packed_b = scratch + m * k;
  for (int64_t i0 = 0; i0 < m; i0 += kPanelRows) {
    const int64_t rows = std::min(kPanelRows, m - i0);
    float* panel = packed_a + i0 * k;
    for (int64_t l = 0; l < k; ++l) {
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        const float value = g.trans_a ? g.a[l + i * g.lda] : g.a[i + l * g.lda];
        panel[l * rows + r] = Round(value, g.rounding);
      }
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t l = 0; l < k; ++l) {
      const float value = g.trans_b ? g.b[j + l * g.ldb] : g.b[l + j * g.ldb];
      packed_b[l + j * k] = Round(value, g.rounding);
    }
  }
  for (int64_t i0 = 0; i0 < m; i0 += kPanelRows) {
    const int64_t rows = std::min(kPanelRows, m - i0);
    const float* panel = packed_a + i0 * k;
    for (int64_t j = 0; j < n; ++j) {
      const float* b = packed_b + j * k;
      float sum[kPanelRows] = {};
      for (int64_t l = 0; l < k; ++l) {
        const float* a = panel + l * rows;
        const float bl = b[l];
        for (int64_t r = 0; r < rows; ++r) sum[r] = std::fma(a[r], bl, sum[r]);
      }
      float* c = g.c + i0 + j * g.ldc;
      if (g.beta == 0.0f) {
        for (int64_t r = 0; r < rows; ++r) c[r] = g.alpha * sum[r];
      } else {
        for (int64_t r = 0; r < rows; ++r) c[r] = std::fma(g.alpha, sum[r], g.beta * c[r]);
      }
    }
  }
}

cublasStatus_t Sgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                     int64_t m, int64_t n, int64_t k, const float* alpha, const float* A,
                     int64_t lda, const float* B, int64_t ldb, const float* beta, float* C,
                     int64_t ldc) {
  gemm_calls.fetch_add(1);
  std::shared_ptr<Handle> state = Lookup(handle);
  if (state == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(state->mu);
  if (!state->live) return CUBLAS_STATUS_NOT_INITIALIZED;

  // The checks of the cuBLAS documentation (for real types, C is the same as T).
  const auto valid_op = [](cublasOperation_t op) {
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
  };
  if (!valid_op(transa) || !valid_op(transb)) return CUBLAS_STATUS_INVALID_VALUE;
  if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  Gemm g;
  g.trans_a = transa != CUBLAS_OP_N;
  g.trans_b = transb != CUBLAS_OP_N;
  // A is stored m x k (N) or k x m (T), B k x n or n x k.
  const int64_t a_rows = g.trans_a ? k : m, a_cols = g.trans_a ? m : k;
  const int64_t b_rows = g.trans_b ? n : k, b_cols = g.trans_b ? k : n;
  if (lda < std::max<int64_t>(1, a_rows) || ldb < std::max<int64_t>(1, b_rows) ||
      ldc < std::max<int64_t>(1, m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  g.alpha = *alpha;  // CUBLAS_POINTER_MODE_HOST: read now
  g.beta = *beta;
  // Quick return, as the reference BLAS.
  if (m == 0 || n == 0 || ((g.alpha == 0.0f || k == 0) && g.beta == 1.0f)) {
    return CUBLAS_STATUS_SUCCESS;
  }
  if (C == nullptr) return CUBLAS_STATUS_INVALID_VALUE;  // C must be scaled
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = A;
  g.lda = lda;
  g.b = B;
  g.ldb = ldb;
  g.c = C;
  g.ldc = ldc;
  g.reads_ab = g.alpha != 0.0f && k > 0;
  g.rounding = RoundingFor(state->math, state->tf32_allowed);

  // Operands: device memory of the handle's device over what is read or written.
  const int device = state->device;
  size_t a_bytes = 0, b_bytes = 0, c_bytes = 0;
  if (!SpanBytes(m, n, ldc, &c_bytes) || !OnDevice(C, c_bytes, device)) {
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  if (g.reads_ab) {
    if (!SpanBytes(a_rows, a_cols, lda, &a_bytes) || !OnDevice(A, a_bytes, device) ||
        !SpanBytes(b_rows, b_cols, ldb, &b_bytes) || !OnDevice(B, b_bytes, device)) {
      return CUBLAS_STATUS_EXECUTION_FAILED;
    }
  }

  // The stream: the handle's, which must belong to the handle's device.
  std::shared_ptr<internal::Stream> stream;
  if (internal::ResolveStream(state->stream, &stream) != cudaSuccess || stream == nullptr ||
      stream->device() != device || internal::Sticky(device) != cudaSuccess) {
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  const cublasStatus_t workspace_status = state->EnsureDefaultWorkspace();
  if (workspace_status != CUBLAS_STATUS_SUCCESS) return workspace_status;
  // A user workspace freed under the handle: the kernel would fault.
  if (state->user_workspace && !OnDevice(state->workspace, state->workspace_bytes, device)) {
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  // The user's workspace serves as scratch when it is large enough (so that two streams
  // sharing one race, as on a GPU); else the host heap.
  const size_t scratch_floats = ScratchFloats(g);
  float* workspace_scratch = nullptr;
  if (state->user_workspace && scratch_floats > 0 &&
      state->workspace_bytes / sizeof(float) >= scratch_floats) {
    workspace_scratch = static_cast<float*>(state->workspace);
  }

  std::string what = "cublasSgemm(" + std::to_string(m) + "x" + std::to_string(n) + "x" +
                     std::to_string(k) + ")";
  stream->Enqueue(std::move(what), [g, a_bytes, b_bytes, c_bytes, device, scratch_floats,
                                    workspace_scratch]() -> cudaError_t {
    // Operands freed since the call: an illegal address on a GPU.
    if (!OnDevice(g.c, c_bytes, device) || !OnDevice(g.a, a_bytes, device) ||
        !OnDevice(g.b, b_bytes, device) ||
        (workspace_scratch != nullptr &&
         !OnDevice(workspace_scratch, scratch_floats * sizeof(float), device))) {
      return cudaErrorIllegalAddress;
    }
    if (workspace_scratch != nullptr) {
      Run(g, workspace_scratch);
    } else {
      std::vector<float> scratch(scratch_floats);
      Run(g, scratch.data());
    }
    return cudaSuccess;
  });
  state->NoteQueued(stream, stream->Tail());
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace
}  // namespace cudaemu::cublas

extern "C" {

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* A, int lda, const float* B, int ldb,
                              const float* beta, float* C, int ldc) {
  return cudaemu::cublas::Sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C,
                                ldc);
}

cublasStatus_t cublasSgemm_v2_64(cublasHandle_t handle, cublasOperation_t transa,
                                 cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
                                 const float* alpha, const float* A, int64_t lda, const float* B,
                                 int64_t ldb, const float* beta, float* C, int64_t ldc) {
  return cudaemu::cublas::Sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C,
                                ldc);
}

}  // extern "C"
