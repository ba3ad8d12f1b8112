// The emulated cuBLAS against the cuBLAS documentation: SGEMM against a plain triple loop in
// double written here, its argument checks and quick returns, math modes (TF32, FP16),
// streams, handles and workspaces.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cudaemu/cublas_testing.h"
#include "cudaemu/testing.h"
#include "gtest/gtest.h"

namespace {

constexpr uint64_t kDefaultWorkspace = uint64_t{32} << 20;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// A device buffer of floats, freed at scope exit.
class DeviceFloats {
 public:
  explicit DeviceFloats(size_t count) : count_(count) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&ptr_), std::max<size_t>(count, 1) * 4),
              cudaSuccess);
  }
  explicit DeviceFloats(const std::vector<float>& values) : DeviceFloats(values.size()) {
    Upload(values);
  }
  ~DeviceFloats() { cudaFree(ptr_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  float* get() const { return ptr_; }
  void Upload(const std::vector<float>& values) {
    ASSERT_EQ(values.size(), count_);
    ASSERT_EQ(cudaMemcpy(ptr_, values.data(), count_ * 4, cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<float> Download() const {
    std::vector<float> values(count_);
    EXPECT_EQ(cudaMemcpy(values.data(), ptr_, count_ * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return values;
  }

 private:
  size_t count_;
  float* ptr_ = nullptr;
};

// A column-major rows x cols matrix stored with leading dimension ld: the elements uniform
// in [-1, 1], the padding rows (ld > rows) `pad`.
std::vector<float> RandomMatrix(int64_t rows, int64_t cols, int64_t ld, uint32_t seed,
                                float pad = kNaN) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> m(static_cast<size_t>(ld * cols), pad);
  for (int64_t j = 0; j < cols; ++j) {
    for (int64_t i = 0; i < rows; ++i) m[i + j * ld] = dist(gen);
  }
  return m;
}

double Identity(float x) { return x; }

// Rounds to `bits` significant bits (the implicit one included), to nearest even, in
// double; for TF32 (11 bits) and normal FP16 values (11 bits).
double RoundSignificand(float x, int bits) {
  if (x == 0.0f || !std::isfinite(x)) return x;
  int exponent;
  std::frexp(static_cast<double>(x), &exponent);  // x = f * 2^exponent, 0.5 <= |f| < 1
  const double quantum = std::ldexp(1.0, exponent - bits);
  return std::nearbyint(x / quantum) * quantum;
}
double Tf32(float x) { return RoundSignificand(x, 11); }
double Fp16(float x) {
  // The test inputs are in [-1, 1]: subnormal FP16 values have the fixed quantum 2^-24.
  if (std::fabs(x) < std::ldexp(1.0, -14)) {
    return std::nearbyint(x / std::ldexp(1.0, -24)) * std::ldexp(1.0, -24);
  }
  return RoundSignificand(x, 11);
}

struct Expected {
  std::vector<double> value;  // the whole ldc x n buffer; padding = the original C
  std::vector<double> scale;  // sum of |terms| of each element, for the error bound
};

// C = alpha * op(A) * op(B) + beta * C as the BLAS defines it, in double, with the
// elements of A and B passed through `round` (TF32/FP16 emulation) first.
Expected Reference(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const std::vector<float>& a, int64_t lda, const std::vector<float>& b,
                   int64_t ldb, float beta, const std::vector<float>& c, int64_t ldc,
                   double (*round)(float) = Identity) {
  Expected e;
  e.value.assign(c.begin(), c.end());
  e.scale.assign(c.size(), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0, scale = 0.0;
      for (int64_t l = 0; l < k; ++l) {
        const double x = round(trans_a ? a[l + i * lda] : a[i + l * lda]);
        const double y = round(trans_b ? b[j + l * ldb] : b[l + j * ldb]);
        sum += x * y;
        scale += std::fabs(x * y);
      }
      double value = alpha * sum;
      scale = std::fabs(alpha) * scale;
      if (beta != 0.0f) {
        value += static_cast<double>(beta) * c[i + j * ldc];
        scale += std::fabs(static_cast<double>(beta) * c[i + j * ldc]);
      }
      e.value[i + j * ldc] = value;
      e.scale[i + j * ldc] = scale;
    }
  }
  return e;
}

// Every element of `actual` within `tolerance` * scale of the expected one; padding
// elements (scale 0, never written) bit-identical to the expected ones.
void ExpectMatches(const std::vector<float>& actual, const Expected& expected, double tolerance) {
  ASSERT_EQ(actual.size(), expected.value.size());
  int failures = 0;
  for (size_t i = 0; i < actual.size() && failures < 10; ++i) {
    const double want = expected.value[i];
    if (std::isnan(want)) {
      if (!std::isnan(actual[i])) {
        ADD_FAILURE() << "element " << i << ": " << actual[i] << ", want NaN (untouched)";
        ++failures;
      }
      continue;
    }
    const double bound = tolerance * expected.scale[i] + 1e-30;
    if (!(std::fabs(actual[i] - want) <= bound)) {
      ADD_FAILURE() << "element " << i << ": " << actual[i] << ", want " << want << " +- "
                    << bound;
      ++failures;
    }
  }
}

// max |actual - want| / max |want| over the m x n elements.
double NormRelativeError(const std::vector<float>& actual, const Expected& expected, int64_t m,
                         int64_t n, int64_t ldc) {
  double max_error = 0.0, max_value = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      const size_t index = static_cast<size_t>(i + j * ldc);
      max_error = std::max(max_error, std::fabs(actual[index] - expected.value[index]));
      max_value = std::max(max_value, std::fabs(expected.value[index]));
    }
  }
  return max_error / max_value;
}

class CublasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    if (handle_ != nullptr) EXPECT_EQ(cublasDestroy(handle_), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }

  // Runs one SGEMM on random operands (padding NaN, which must not be read) and checks it
  // against the double reference; returns C as computed.
  std::vector<float> CheckGemm(cublasOperation_t op_a, cublasOperation_t op_b, int64_t m,
                               int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                               float alpha, float beta, uint32_t seed) {
    const bool trans_a = op_a != CUBLAS_OP_N, trans_b = op_b != CUBLAS_OP_N;
    const std::vector<float> a =
        RandomMatrix(trans_a ? k : m, trans_a ? m : k, lda, seed);
    const std::vector<float> b =
        RandomMatrix(trans_b ? n : k, trans_b ? k : n, ldb, seed + 1);
    const std::vector<float> c = RandomMatrix(m, n, ldc, seed + 2);
    DeviceFloats da(a), db(b), dc(c);
    EXPECT_EQ(cublasSgemm_64(handle_, op_a, op_b, m, n, k, &alpha, da.get(), lda, db.get(), ldb,
                             &beta, dc.get(), ldc),
              CUBLAS_STATUS_SUCCESS);
    const std::vector<float> result = dc.Download();
    ExpectMatches(result,
                  Reference(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc),
                  1e-5);
    return result;
  }

  cublasHandle_t handle_ = nullptr;
};

// ---- the product ---------------------------------------------------------------------------

TEST_F(CublasTest, AllTransposeCombinationsWithPaddedLeadingDimensions) {
  const int64_t m = 37, n = 23, k = 19;
  uint32_t seed = 1;
  for (cublasOperation_t op_a : {CUBLAS_OP_N, CUBLAS_OP_T}) {
    for (cublasOperation_t op_b : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      SCOPED_TRACE(std::to_string(op_a) + std::to_string(op_b));
      const int64_t lda = (op_a == CUBLAS_OP_N ? m : k) + 3;
      const int64_t ldb = (op_b == CUBLAS_OP_N ? k : n) + 5;
      CheckGemm(op_a, op_b, m, n, k, lda, ldb, m + 2, 1.0f, 0.0f, seed += 10);
    }
  }
}

TEST_F(CublasTest, ConjugateTransposeIsTransposeForReals) {
  CheckGemm(CUBLAS_OP_C, CUBLAS_OP_C, 9, 14, 6, 6, 14, 9, 1.0f, 0.0f, 7);
  CheckGemm(CUBLAS_OP_C, CUBLAS_OP_N, 9, 14, 6, 8, 6, 11, 1.0f, 0.0f, 8);
}

TEST_F(CublasTest, LargerThanOnePanel) {
  // More than 64 rows (the emulation's panel height) and a long k.
  CheckGemm(CUBLAS_OP_N, CUBLAS_OP_N, 131, 17, 300, 131, 300, 133, 1.0f, 0.0f, 11);
  CheckGemm(CUBLAS_OP_T, CUBLAS_OP_T, 65, 3, 129, 130, 3, 65, 1.0f, 0.0f, 12);
}

TEST_F(CublasTest, Int32Entry) {
  const int m = 5, n = 4, k = 3;
  const std::vector<float> a = RandomMatrix(m, k, m, 1), b = RandomMatrix(k, n, k, 2),
                           c = RandomMatrix(m, n, m, 3);
  DeviceFloats da(a), db(b), dc(c);
  const float alpha = 2.0f, beta = 0.5f;
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da.get(), m,
                        db.get(), k, &beta, dc.get(), m),
            CUBLAS_STATUS_SUCCESS);
  ExpectMatches(dc.Download(),
                Reference(false, false, m, n, k, alpha, a, m, b, k, beta, c, m), 1e-5);
}

TEST_F(CublasTest, AlphaAndBeta) {
  CheckGemm(CUBLAS_OP_N, CUBLAS_OP_T, 12, 10, 8, 12, 10, 15, 1.5f, -0.75f, 21);
  CheckGemm(CUBLAS_OP_T, CUBLAS_OP_N, 12, 10, 8, 8, 8, 12, -3.0f, 2.0f, 22);
  CheckGemm(CUBLAS_OP_N, CUBLAS_OP_N, 12, 10, 8, 12, 8, 12, 0.25f, 1.0f, 23);
}

TEST_F(CublasTest, BetaZeroDoesNotReadC) {
  const int64_t m = 8, n = 6, k = 5, ldc = 10;
  const std::vector<float> a = RandomMatrix(m, k, m, 31), b = RandomMatrix(k, n, k, 32);
  std::vector<float> c(ldc * n, kNaN);  // padding NaN too: must stay untouched
  DeviceFloats da(a), db(b), dc(c);
  const float alpha = 1.25f, beta = 0.0f;
  ASSERT_EQ(cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da.get(), m,
                           db.get(), k, &beta, dc.get(), ldc),
            CUBLAS_STATUS_SUCCESS);
  const std::vector<float> result = dc.Download();
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) ASSERT_TRUE(std::isfinite(result[i + j * ldc])) << i << j;
  }
  ExpectMatches(result, Reference(false, false, m, n, k, alpha, a, m, b, k, beta, c, ldc), 1e-5);
}

TEST_F(CublasTest, AlphaZeroDoesNotReadAOrB) {
  const int64_t m = 4, n = 3, k = 6;
  const std::vector<float> nan_a(m * k, kNaN), nan_b(k * n, kNaN);
  const std::vector<float> c = RandomMatrix(m, n, m, 41, 0.0f);
  DeviceFloats da(nan_a), db(nan_b), dc(c);
  const float zero = 0.0f, two = 2.0f;
  // C = 2 C: A and B (NaN) are not read...
  ASSERT_EQ(cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &zero, da.get(), m,
                           db.get(), k, &two, dc.get(), m),
            CUBLAS_STATUS_SUCCESS);
  std::vector<float> result = dc.Download();
  for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(result[i], 2.0f * c[i]) << i;
  // ...not even required to be device memory.
  ASSERT_EQ(cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &zero, nullptr, m,
                           nullptr, k, &two, dc.get(), m),
            CUBLAS_STATUS_SUCCESS);
  result = dc.Download();
  for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(result[i], 4.0f * c[i]) << i;
  // alpha = beta = 0: C = 0, a NaN in C included.
  dc.Upload(std::vector<float>(m * n, kNaN));
  ASSERT_EQ(cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &zero, da.get(), m,
                           db.get(), k, &zero, dc.get(), m),
            CUBLAS_STATUS_SUCCESS);
  for (float value : dc.Download()) ASSERT_EQ(value, 0.0f);
}

TEST_F(CublasTest, KZeroScalesC) {
  const int64_t m = 3, n = 2;
  const std::vector<float> c = RandomMatrix(m, n, m, 51, 0.0f);
  DeviceFloats dc(c);
  const float one = 1.0f, half = 0.5f;
  ASSERT_EQ(cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, 0, &one, nullptr, m, nullptr,
                           1, &half, dc.get(), m),
            CUBLAS_STATUS_SUCCESS);
  const std::vector<float> result = dc.Download();
  for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(result[i], 0.5f * c[i]) << i;
}

TEST_F(CublasTest, QuickReturnsTouchNothing) {
  // Every operand a host pointer to NaN: a routine that ran (or checked them) would fail or
  // write; quick returns do neither.
  std::vector<float> host(64, kNaN);
  float* p = host.data();
  const float one = 1.0f, zero = 0.0f, two = 2.0f;
  const int64_t calls = cudaemu::testing::CublasGemmCalls();
  // m == 0, n == 0 (leading dimensions still checked: 1 is the minimum).
  EXPECT_EQ(cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 0, 4, 4, &one, p, 1, p, 4, &two,
                           p, 1),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 0, 4, &one, p, 4, p, 4, &two,
                           p, 4),
            CUBLAS_STATUS_SUCCESS);
  // (alpha == 0 or k == 0) and beta == 1.
  EXPECT_EQ(cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &zero, p, 4, p, 4, &one,
                           p, 4),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSgemm_64(handle_, CUBLAS_OP_T, CUBLAS_OP_T, 4, 4, 0, &one, p, 1, p, 4, &one,
                           p, 4),
            CUBLAS_STATUS_SUCCESS);
  // Not a quick return: k == 0 with beta != 1 scales C, which must be device memory.
  EXPECT_EQ(cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 0, &one, p, 4, p, 1, &two,
                           p, 4),
            CUBLAS_STATUS_EXECUTION_FAILED);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (float value : host) EXPECT_TRUE(std::isnan(value));
  EXPECT_EQ(cudaemu::testing::CublasGemmCalls(), calls + 5);
}

// ---- argument checks -----------------------------------------------------------------------

TEST_F(CublasTest, ArgumentChecks) {
  const int64_t m = 6, n = 5, k = 4;
  const std::vector<float> c = RandomMatrix(m, n, m, 61, 0.0f);
  DeviceFloats da(RandomMatrix(m, k, m, 62)), db(RandomMatrix(k, n, k, 63)), dc(c);
  float* A = da.get();
  float* B = db.get();
  float* C = dc.get();
  const float one = 1.0f;
  const auto gemm = [&](cublasOperation_t ta, cublasOperation_t tb, int64_t gm, int64_t gn,
                        int64_t gk, const float* alpha, int64_t lda, int64_t ldb,
                        const float* beta, float* gc, int64_t ldc) {
    return cublasSgemm_64(handle_, ta, tb, gm, gn, gk, alpha, A, lda, B, ldb, beta, gc, ldc);
  };
  const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  // (cublasOperation_t holds 0..3 in C++: CUBLAS_OP_CONJG is the only invalid value that
  // UBSan lets a C++ caller pass.)
  constexpr cublasStatus_t kInvalid = CUBLAS_STATUS_INVALID_VALUE;
  EXPECT_EQ(gemm(N, N, -1, n, k, &one, m, k, &one, C, m), kInvalid);
  EXPECT_EQ(gemm(N, N, m, -1, k, &one, m, k, &one, C, m), kInvalid);
  EXPECT_EQ(gemm(N, N, m, n, -1, &one, m, k, &one, C, m), kInvalid);
  EXPECT_EQ(gemm(CUBLAS_OP_CONJG, N, m, n, k, &one, m, k, &one, C, m), kInvalid);
  EXPECT_EQ(gemm(N, CUBLAS_OP_CONJG, m, n, k, &one, m, k, &one, C, m), kInvalid);
  // lda < max(1, m) for N, < max(1, k) for T.
  EXPECT_EQ(gemm(N, N, m, n, k, &one, m - 1, k, &one, C, m), kInvalid);
  EXPECT_EQ(gemm(T, N, k, n, m, &one, m - 1, m, &one, C, k), kInvalid);
  EXPECT_EQ(gemm(N, N, 0, n, k, &one, 0, k, &one, C, 1), kInvalid);
  EXPECT_EQ(gemm(T, N, m, n, 0, &one, 0, 1, &one, C, m), kInvalid);
  // ldb < max(1, k) for N, < max(1, n) for T.
  EXPECT_EQ(gemm(N, N, m, n, k, &one, m, k - 1, &one, C, m), kInvalid);
  EXPECT_EQ(gemm(N, T, m, k, n, &one, m, k - 1, &one, C, m), kInvalid);
  EXPECT_EQ(gemm(N, N, m, n, 0, &one, m, 0, &one, C, m), kInvalid);
  // ldc < max(1, m).
  EXPECT_EQ(gemm(N, N, m, n, k, &one, m, k, &one, C, m - 1), kInvalid);
  EXPECT_EQ(gemm(N, N, 0, n, k, &one, 1, k, &one, C, 0), kInvalid);
  // alpha, beta NULL; C NULL when C is to be scaled.
  EXPECT_EQ(gemm(N, N, m, n, k, nullptr, m, k, &one, C, m), kInvalid);
  EXPECT_EQ(gemm(N, N, m, n, k, &one, m, k, nullptr, C, m), kInvalid);
  EXPECT_EQ(gemm(N, N, m, n, k, &one, m, k, &one, nullptr, m), kInvalid);
  // The same calls at the boundary are valid (T: op(A) = Aᵀ is m x k, stored k x m).
  EXPECT_EQ(gemm(N, N, m, n, k, &one, m, k, &one, C, m), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(T, N, m, n, k, &one, k, k, &one, C, m), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(N, N, 0, n, k, &one, 1, k, &one, C, 1), CUBLAS_STATUS_SUCCESS);
  // 32-bit entry: the same checks.
  EXPECT_EQ(cublasSgemm(handle_, N, N, m, n, k, &one, A, static_cast<int>(m - 1), B,
                        static_cast<int>(k), &one, C, static_cast<int>(m)),
            kInvalid);
  EXPECT_EQ(cublasSgemm(handle_, N, N, -5, n, k, &one, A, static_cast<int>(m), B,
                        static_cast<int>(k), &one, C, static_cast<int>(m)),
            kInvalid);
  // Handles that are not live.
  EXPECT_EQ(cublasSgemm_64(nullptr, N, N, m, n, k, &one, A, m, B, k, &one, C, m),
            CUBLAS_STATUS_NOT_INITIALIZED);
  cublasHandle_t other;
  ASSERT_EQ(cublasCreate(&other), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasDestroy(other), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSgemm_64(other, N, N, m, n, k, &one, A, m, B, k, &one, C, m),
            CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST_F(CublasTest, FailedChecksLeaveCUntouched) {
  const int64_t m = 4, n = 4, k = 4;
  const std::vector<float> c = RandomMatrix(m, n, m, 71, 0.0f);
  DeviceFloats da(RandomMatrix(m, k, m, 72)), db(RandomMatrix(k, n, k, 73)), dc(c);
  const float one = 1.0f;
  EXPECT_EQ(cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da.get(), m,
                           db.get(), k, &one, dc.get(), m - 1),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(dc.Download(), c);
}

TEST_F(CublasTest, OperandsMustBeDeviceMemoryOfTheHandlesDevice) {
  const int64_t m = 4, n = 3, k = 2;
  DeviceFloats da(RandomMatrix(m, k, m, 81)), db(RandomMatrix(k, n, k, 82)),
      dc(RandomMatrix(m, n, m, 83, 0.0f));
  std::vector<float> host(64, 1.0f);
  const float one = 1.0f;
  const auto gemm = [&](const float* a, int64_t lda, const float* b, float* c, int64_t ldc) {
    return cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, lda, b, k, &one,
                          c, ldc);
  };
  constexpr cublasStatus_t kFailed = CUBLAS_STATUS_EXECUTION_FAILED;
  cudaGetLastError();  // from earlier tests
  EXPECT_EQ(gemm(host.data(), m, db.get(), dc.get(), m), kFailed);
  EXPECT_EQ(gemm(da.get(), m, host.data(), dc.get(), m), kFailed);
  EXPECT_EQ(gemm(da.get(), m, db.get(), host.data(), m), kFailed);
  EXPECT_EQ(gemm(nullptr, m, db.get(), dc.get(), m), kFailed);
  // An overrun: the leading dimension takes the last column past the allocation.
  EXPECT_EQ(gemm(da.get(), m + 1, db.get(), dc.get(), m), kFailed);
  EXPECT_EQ(gemm(da.get(), m, db.get(), dc.get(), m + 1), kFailed);
  EXPECT_EQ(gemm(da.get() + 1, m, db.get(), dc.get(), m), kFailed);
  // Misaligned floats.
  EXPECT_EQ(gemm(reinterpret_cast<const float*>(reinterpret_cast<const char*>(da.get()) + 2), m,
                 db.get(), dc.get(), m),
            kFailed);
  // Memory of device 1 with a handle of device 0.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  {
    DeviceFloats other(RandomMatrix(m, k, m, 84));
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    EXPECT_EQ(gemm(other.get(), m, db.get(), dc.get(), m), kFailed);
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(gemm(da.get(), m, db.get(), dc.get(), m), CUBLAS_STATUS_SUCCESS);
  // Nothing faulted: the context has no sticky error.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// ---- math modes ----------------------------------------------------------------------------

class MathModeTest : public CublasTest {
 protected:
  static constexpr int64_t kM = 48, kN = 40, kK = 256;

  // C = op(A)·op(B) (alpha 1, beta 0) on fixed random inputs under `mode`.
  std::vector<float> Product(cublasMath_t mode) {
    EXPECT_EQ(cublasSetMathMode(handle_, mode), CUBLAS_STATUS_SUCCESS);
    DeviceFloats da(a_), db(b_), dc(std::vector<float>(kM * kN, kNaN));
    const float one = 1.0f, zero = 0.0f;
    EXPECT_EQ(cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, kM, kN, kK, &one, da.get(), kM,
                             db.get(), kK, &zero, dc.get(), kM),
              CUBLAS_STATUS_SUCCESS);
    return dc.Download();
  }
  Expected Want(double (*round)(float)) const {
    return Reference(false, false, kM, kN, kK, 1.0f, a_, kM, b_, kK, 0.0f,
                     std::vector<float>(kM * kN, 0.0f), kM, round);
  }

  const std::vector<float> a_ = RandomMatrix(kM, kK, kM, 91);
  const std::vector<float> b_ = RandomMatrix(kK, kN, kK, 92);
};

TEST_F(MathModeTest, DefaultIsFp32) {
  cublasMath_t mode;
  ASSERT_EQ(cublasGetMathMode(handle_, &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_DEFAULT_MATH);
  const std::vector<float> c = Product(CUBLAS_DEFAULT_MATH);
  ExpectMatches(c, Want(Identity), 1e-5);
  EXPECT_LT(NormRelativeError(c, Want(Identity), kM, kN, kM), 1e-5);
  ExpectMatches(Product(CUBLAS_PEDANTIC_MATH), Want(Identity), 1e-5);
  ExpectMatches(Product(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION), Want(Identity), 1e-5);
}

TEST_F(MathModeTest, Tf32RoundsTheInputs) {
  const std::vector<float> c = Product(CUBLAS_TF32_TENSOR_OP_MATH);
  // Far from the FP32 product...
  EXPECT_GT(NormRelativeError(c, Want(Identity), kM, kN, kM), 1e-5);
  // ...and the product of the TF32-rounded inputs.
  ExpectMatches(c, Want(Tf32), 1e-5);
  // With the flag ORed in, the same.
  const auto mode = static_cast<cublasMath_t>(CUBLAS_TF32_TENSOR_OP_MATH |
                                              CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  EXPECT_EQ(Product(mode), c);
  cublasMath_t got;
  ASSERT_EQ(cublasGetMathMode(handle_, &got), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got, mode);
  // And back.
  ExpectMatches(Product(CUBLAS_DEFAULT_MATH), Want(Identity), 1e-5);
}

TEST_F(MathModeTest, Tf32OverrideZeroKeepsFp32) {
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // no stream work in flight
  ASSERT_EQ(setenv("NVIDIA_TF32_OVERRIDE", "0", 1), 0);
  cublasHandle_t handle;
  const cublasStatus_t status = cublasCreate(&handle);
  ASSERT_EQ(unsetenv("NVIDIA_TF32_OVERRIDE"), 0);
  ASSERT_EQ(status, CUBLAS_STATUS_SUCCESS);
  std::swap(handle, handle_);
  ExpectMatches(Product(CUBLAS_TF32_TENSOR_OP_MATH), Want(Identity), 1e-5);
  std::swap(handle, handle_);
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  // The override is read at cublasCreate: the fixture's handle still uses TF32.
  EXPECT_GT(NormRelativeError(Product(CUBLAS_TF32_TENSOR_OP_MATH), Want(Identity), kM, kN, kM),
            1e-5);
}

TEST_F(MathModeTest, DeprecatedTensorOpMathRoundsToHalf) {
  const std::vector<float> c = Product(CUBLAS_TENSOR_OP_MATH);
  EXPECT_GT(NormRelativeError(c, Want(Identity), kM, kN, kM), 1e-5);
  ExpectMatches(c, Want(Fp16), 1e-5);
}

TEST_F(MathModeTest, InvalidModes) {
  for (int mode : {4, 5, 7, 8, 15, 16 | 5, 31}) {  // in the enum's range (0..31)
    EXPECT_EQ(cublasSetMathMode(handle_, static_cast<cublasMath_t>(mode)),
              CUBLAS_STATUS_INVALID_VALUE)
        << mode;
  }
  cublasMath_t got;
  ASSERT_EQ(cublasGetMathMode(handle_, &got), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got, CUBLAS_DEFAULT_MATH);
  EXPECT_EQ(cublasGetMathMode(handle_, nullptr), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetMathMode(nullptr, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasGetMathMode(nullptr, &got), CUBLAS_STATUS_NOT_INITIALIZED);
}

// ---- streams -------------------------------------------------------------------------------

TEST_F(CublasTest, RunsInStreamOrder) {
  // CUDAEMU_STREAM_DELAY_US (set for this test binary) delays every item: a GEMM that did not
  // wait for the copies before it, or that the copy after it did not wait for, reads or
  // returns stale data.
  const int64_t m = 16, n = 12, k = 8;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cublasSetStream(handle_, stream), CUBLAS_STATUS_SUCCESS);
  cudaStream_t got;
  ASSERT_EQ(cublasGetStream(handle_, &got), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got, stream);
  DeviceFloats da(m * k), db(k * n), dc(m * n);
  const float one = 1.0f, zero = 0.0f;
  for (uint32_t round = 0; round < 5; ++round) {
    const std::vector<float> a = RandomMatrix(m, k, m, 100 + round);
    const std::vector<float> b = RandomMatrix(k, n, k, 200 + round);
    std::vector<float> c(m * n, kNaN);
    ASSERT_EQ(cudaMemcpyAsync(da.get(), a.data(), a.size() * 4, cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(db.get(), b.data(), b.size() * 4, cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    ASSERT_EQ(cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da.get(), m,
                             db.get(), k, &zero, dc.get(), m),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaMemcpyAsync(c.data(), dc.get(), c.size() * 4, cudaMemcpyDeviceToHost, stream),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ExpectMatches(c, Reference(false, false, m, n, k, 1.0f, a, m, b, k, 0.0f, c, m), 1e-5);
  }
  ASSERT_EQ(cublasSetStream(handle_, nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(CublasTest, StreamMustBelongToTheHandlesDevice) {
  const int64_t m = 2, n = 2, k = 2;
  DeviceFloats da(RandomMatrix(m, k, m, 1)), db(RandomMatrix(k, n, k, 2)),
      dc(RandomMatrix(m, n, m, 3, 0.0f));
  const float one = 1.0f;
  const auto gemm = [&] {
    return cublasSgemm_64(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da.get(), m,
                          db.get(), k, &one, dc.get(), m);
  };
  // The legacy default stream is that of the current device.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_EQ(gemm(), CUBLAS_STATUS_EXECUTION_FAILED);
  cudaStream_t stream1;
  ASSERT_EQ(cudaStreamCreate(&stream1), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(gemm(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetStream(handle_, stream1), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(), CUBLAS_STATUS_EXECUTION_FAILED);
  // A destroyed stream.
  ASSERT_EQ(cudaStreamDestroy(stream1), cudaSuccess);
  EXPECT_EQ(gemm(), CUBLAS_STATUS_EXECUTION_FAILED);
  ASSERT_EQ(cublasSetStream(handle_, nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(), CUBLAS_STATUS_SUCCESS);
}

TEST(CublasHandleTest, DestroyWaitsForTheHandlesWork) {
  // Device memory is host memory here: reading C directly after cublasDestroy is ordered
  // only by cublasDestroy's wait (ThreadSanitizer checks it; the stream delay makes a
  // missing wait visible as stale values).
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const int64_t m = 32, n = 32, k = 32;
  const std::vector<float> a = RandomMatrix(m, k, m, 5), b = RandomMatrix(k, n, k, 6);
  DeviceFloats da(a), db(b), dc(std::vector<float>(m * n, kNaN));
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cublasHandle_t handle;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetStream(handle, stream), CUBLAS_STATUS_SUCCESS);
  const float one = 1.0f, zero = 0.0f;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(cublasSgemm_64(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da.get(), m,
                             db.get(), k, &zero, dc.get(), m),
              CUBLAS_STATUS_SUCCESS);
  }
  ASSERT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  const std::vector<float> c(dc.get(), dc.get() + m * n);
  ExpectMatches(c, Reference(false, false, m, n, k, 1.0f, a, m, b, k, 0.0f, c, m), 1e-5);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// ---- handles -------------------------------------------------------------------------------

TEST(CublasHandleTest, Lifetime) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const int64_t live = cudaemu::testing::CublasLiveHandles();
  EXPECT_EQ(cublasCreate(nullptr), CUBLAS_STATUS_INVALID_VALUE);
  cublasHandle_t a, b;
  ASSERT_EQ(cublasCreate(&a), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaemu::testing::CublasLiveHandles(), live + 1);
  ASSERT_EQ(cublasCreate(&b), CUBLAS_STATUS_SUCCESS);
  EXPECT_NE(a, b);
  EXPECT_EQ(cudaemu::testing::CublasLiveHandles(), live + 2);
  EXPECT_EQ(cublasDestroy(a), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaemu::testing::CublasLiveHandles(), live + 1);
  // A destroyed handle stays invalid for every call, even after new handles are created.
  cublasHandle_t c;
  ASSERT_EQ(cublasCreate(&c), CUBLAS_STATUS_SUCCESS);
  EXPECT_NE(c, a);
  EXPECT_EQ(cublasDestroy(a), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasSetStream(a, nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
  cudaStream_t stream;
  EXPECT_EQ(cublasGetStream(a, &stream), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasSetMathMode(a, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasSetWorkspace(a, nullptr, 0), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasDestroy(nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasDestroy(reinterpret_cast<cublasHandle_t>(&stream)),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cudaemu::testing::CublasLiveHandles(), live + 2);
  EXPECT_EQ(cublasGetStream(b, nullptr), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasGetStream(b, &stream), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(stream, nullptr);
  EXPECT_EQ(cublasDestroy(b), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasDestroy(c), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaemu::testing::CublasLiveHandles(), live);
}

TEST(CublasHandleTest, GemmCallsCountEveryCall) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const int64_t calls = cudaemu::testing::CublasGemmCalls();
  const float one = 1.0f;
  EXPECT_EQ(cublasSgemm_64(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, nullptr, 1, nullptr,
                           1, &one, nullptr, 1),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasSgemm(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, nullptr, 1, nullptr, 1,
                        &one, nullptr, 1),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cudaemu::testing::CublasGemmCalls(), calls + 2);
}

TEST(CublasHandleTest, HandleBelongsToTheCurrentDevice) {
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  const uint64_t before0 = cudaemu::testing::CublasInternalWorkspaceBytes(0);
  const uint64_t before1 = cudaemu::testing::CublasInternalWorkspaceBytes(1);
  cublasHandle_t handle;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaemu::testing::CublasInternalWorkspaceBytes(1), before1 + kDefaultWorkspace);
  EXPECT_EQ(cudaemu::testing::CublasInternalWorkspaceBytes(0), before0);
  // Its operands are device 1's.
  {
    DeviceFloats d(std::vector<float>(4, 1.0f));
    const float one = 1.0f, zero = 0.0f;
    EXPECT_EQ(cublasSgemm_64(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d.get(), 2,
                             d.get(), 2, &zero, d.get(), 2),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(d.Download(), std::vector<float>(4, 2.0f));
  }
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaemu::testing::CublasInternalWorkspaceBytes(1), before1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST(CublasHandleTest, VersionAndStatusStrings) {
  int version = 0;
  EXPECT_EQ(cublasGetVersion(nullptr, &version), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(version, CUBLAS_VERSION);
  EXPECT_EQ(version / 10000, 13);
  EXPECT_EQ(cublasGetVersion(nullptr, nullptr), CUBLAS_STATUS_NOT_INITIALIZED);

  const std::vector<std::pair<cublasStatus_t, std::string>> names = {
      {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS"},
      {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED"},
      {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED"},
      {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE"},
      {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH"},
      {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR"},
      {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED"},
      {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR"},
      {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED"},
      {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR"},
  };
  std::vector<std::string> strings;
  for (const auto& [status, name] : names) {
    EXPECT_EQ(cublasGetStatusName(status), name);
    strings.emplace_back(cublasGetStatusString(status));
    EXPECT_FALSE(strings.back().empty());
  }
  std::sort(strings.begin(), strings.end());
  EXPECT_EQ(std::unique(strings.begin(), strings.end()), strings.end());
  EXPECT_EQ(std::string(cublasGetStatusString(CUBLAS_STATUS_SUCCESS)), "success");
  EXPECT_EQ(std::string(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)),
            "an unsupported value or parameter was passed to the function");
  EXPECT_EQ(std::string(cublasGetStatusName(static_cast<cublasStatus_t>(2))),
            "unrecognized status");
  EXPECT_EQ(std::string(cublasGetStatusString(static_cast<cublasStatus_t>(31))),
            "unrecognized status");
}

// ---- workspaces ----------------------------------------------------------------------------

TEST(CublasWorkspaceTest, DefaultWorkspaceAccounting) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const uint64_t base = cudaemu::testing::DeviceBytesInUse(0);
  const uint64_t base1 = cudaemu::testing::DeviceBytesInUse(1);
  const uint64_t internal = cudaemu::testing::CublasInternalWorkspaceBytes(0);
  cublasHandle_t handle;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaemu::testing::DeviceBytesInUse(0), base + kDefaultWorkspace);
  EXPECT_EQ(cudaemu::testing::DeviceBytesInUse(1), base1);
  EXPECT_EQ(cudaemu::testing::CublasInternalWorkspaceBytes(0), internal + kDefaultWorkspace);
  size_t free_bytes, total_bytes;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaemu::testing::DeviceBytesInUse(0), base);
  EXPECT_EQ(cudaemu::testing::CublasInternalWorkspaceBytes(0), internal);
  size_t free_after;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total_bytes), cudaSuccess);
  EXPECT_EQ(free_after, free_bytes + kDefaultWorkspace);
}

TEST(CublasWorkspaceTest, UserWorkspaceReplacesTheDefault) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const uint64_t base = cudaemu::testing::DeviceBytesInUse(0);
  const uint64_t internal = cudaemu::testing::CublasInternalWorkspaceBytes(0);
  constexpr size_t kUser = size_t{4} << 20;
  void* user = nullptr;
  ASSERT_EQ(cudaMalloc(&user, kUser), cudaSuccess);
  cublasHandle_t handle;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaemu::testing::DeviceBytesInUse(0), base + kUser + kDefaultWorkspace);

  // Checks first: alignment to 256 bytes, device memory of the handle's device, in bounds.
  std::vector<char> host(1024);
  EXPECT_EQ(cublasSetWorkspace(handle, static_cast<char*>(user) + 128, 1024),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetWorkspace(handle, static_cast<char*>(user) + 256, kUser),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetWorkspace(handle, nullptr, 1024), CUBLAS_STATUS_INVALID_VALUE);
  void* host_aligned = reinterpret_cast<void*>(
      (reinterpret_cast<uintptr_t>(host.data()) + 255) / 256 * 256);
  EXPECT_EQ(cublasSetWorkspace(handle, host_aligned, 256), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cudaemu::testing::CublasInternalWorkspaceBytes(0), internal + kDefaultWorkspace);

  // The user's buffer replaces the default workspace, which is released.
  ASSERT_EQ(cublasSetWorkspace(handle, user, kUser), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaemu::testing::DeviceBytesInUse(0), base + kUser);
  EXPECT_EQ(cudaemu::testing::CublasInternalWorkspaceBytes(0), internal);

  // GEMMs still right, with the workspace as scratch (it fits) or not (it does not).
  const auto check = [&](int64_t m, int64_t n, int64_t k, uint32_t seed) {
    const std::vector<float> a = RandomMatrix(m, k, m, seed), b = RandomMatrix(k, n, k, seed + 1);
    DeviceFloats da(a), db(b), dc(std::vector<float>(m * n, kNaN));
    const float one = 1.0f, zero = 0.0f;
    ASSERT_EQ(cublasSgemm_64(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da.get(), m,
                             db.get(), k, &zero, dc.get(), m),
              CUBLAS_STATUS_SUCCESS);
    const std::vector<float> c = dc.Download();
    ExpectMatches(c, Reference(false, false, m, n, k, 1.0f, a, m, b, k, 0.0f, c, m), 1e-5);
  };
  check(20, 30, 40, 1);
  // Packed op(A) and op(B) of 2.2 MB fit in 4 MiB: the emulation uses the workspace as
  // scratch (as a split-K GEMM would), so a workspace shared between streams races.
  ASSERT_EQ(cudaMemset(user, 0xff, kUser), cudaSuccess);
  check(700, 2, 800, 3);
  std::vector<unsigned char> scratch(1024);
  ASSERT_EQ(cudaMemcpy(scratch.data(), user, scratch.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_NE(scratch, std::vector<unsigned char>(1024, 0xff));
  check(1100, 2, 1000, 5);  // 4.4 MB: does not
  EXPECT_EQ(cudaemu::testing::CublasInternalWorkspaceBytes(0), internal);

  // No workspace at all.
  ASSERT_EQ(cublasSetWorkspace(handle, nullptr, 0), CUBLAS_STATUS_SUCCESS);
  check(8, 9, 10, 7);
  EXPECT_EQ(cudaemu::testing::DeviceBytesInUse(0), base + kUser);

  // cublasSetStream goes back to the default workspace, allocated again when a routine runs.
  ASSERT_EQ(cublasSetWorkspace(handle, user, kUser), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetStream(handle, nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaemu::testing::CublasInternalWorkspaceBytes(0), internal);
  check(8, 9, 10, 9);
  EXPECT_EQ(cudaemu::testing::CublasInternalWorkspaceBytes(0), internal + kDefaultWorkspace);
  EXPECT_EQ(cudaemu::testing::DeviceBytesInUse(0), base + kUser + kDefaultWorkspace);

  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaemu::testing::DeviceBytesInUse(0), base + kUser);
  EXPECT_EQ(cudaFree(user), cudaSuccess);
  EXPECT_EQ(cudaemu::testing::DeviceBytesInUse(0), base);
}

TEST(CublasWorkspaceTest, FreedUserWorkspaceFailsTheRoutine) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  DeviceFloats d(std::vector<float>(4, 1.0f));
  void* user = nullptr;
  ASSERT_EQ(cudaMalloc(&user, 1 << 16), cudaSuccess);
  cublasHandle_t handle;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetWorkspace(handle, user, 1 << 16), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaFree(user), cudaSuccess);
  const float one = 1.0f;
  EXPECT_EQ(cublasSgemm_64(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d.get(), 2, d.get(),
                           2, &one, d.get(), 2),
            CUBLAS_STATUS_EXECUTION_FAILED);
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

TEST(CublasWorkspaceTest, WorkspaceConfigAndAllocationFailure) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // no stream work in flight
  const int64_t live = cudaemu::testing::CublasLiveHandles();
  const uint64_t base = cudaemu::testing::DeviceBytesInUse(0);
  cublasHandle_t handle;
  // CUBLAS_WORKSPACE_CONFIG=:SIZE_KIB:COUNT sizes the default workspace.
  ASSERT_EQ(setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:2:16:8", 1), 0);
  cublasStatus_t status = cublasCreate(&handle);
  ASSERT_EQ(status, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaemu::testing::DeviceBytesInUse(0), base + (8u << 20) + (128u << 10));
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  // More than the device has: CUBLAS_STATUS_ALLOC_FAILED and no handle.
  ASSERT_EQ(setenv("CUBLAS_WORKSPACE_CONFIG", ":1073741824:1", 1), 0);  // 1 TiB
  status = cublasCreate(&handle);
  ASSERT_EQ(unsetenv("CUBLAS_WORKSPACE_CONFIG"), 0);
  EXPECT_EQ(status, CUBLAS_STATUS_ALLOC_FAILED);
  EXPECT_EQ(cudaemu::testing::CublasLiveHandles(), live);
  EXPECT_EQ(cudaemu::testing::DeviceBytesInUse(0), base);
  cudaGetLastError();  // the failed allocation may be recorded
}

// ---- threads -------------------------------------------------------------------------------

TEST(CublasThreadTest, HandlesOnManyThreads) {
  // Each thread creates and destroys handles on its own stream and device while the others
  // run; two more threads share one handle (cuBLAS allows it when the configuration is the
  // same). ThreadSanitizer checks the registry and the streams.
  constexpr int kThreads = 4;
  const int64_t m = 24, n = 20, k = 16;
  const std::vector<float> a = RandomMatrix(m, k, m, 301), b = RandomMatrix(k, n, k, 302);
  const std::vector<float> zeros(m * n, 0.0f);
  const Expected want = Reference(false, false, m, n, k, 1.0f, a, m, b, k, 0.0f, zeros, m);
  std::atomic<int> failures{0};
  const auto worker = [&](int device, cublasHandle_t shared, cudaStream_t shared_stream) {
    if (cudaSetDevice(device) != cudaSuccess) {
      ++failures;
      return;
    }
    DeviceFloats da(a), db(b), dc(m * n);
    cudaStream_t stream = shared_stream;
    if (shared == nullptr && cudaStreamCreate(&stream) != cudaSuccess) ++failures;
    const float one = 1.0f, zero = 0.0f;
    for (int round = 0; round < 4; ++round) {
      cublasHandle_t handle = shared;
      if (shared == nullptr && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
        ++failures;
        continue;
      }
      if (cublasSetStream(handle, stream) != CUBLAS_STATUS_SUCCESS) ++failures;
      if (round % 2 == 1 && cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH) !=
                                  CUBLAS_STATUS_SUCCESS) ++failures;
      if (cublasSgemm_64(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da.get(), m, db.get(),
                         k, &zero, dc.get(), m) != CUBLAS_STATUS_SUCCESS) {
        ++failures;
      }
      std::vector<float> c(m * n);
      if (cudaMemcpyAsync(c.data(), dc.get(), c.size() * 4, cudaMemcpyDeviceToHost, stream) !=
              cudaSuccess ||
          cudaStreamSynchronize(stream) != cudaSuccess) {
        ++failures;
      }
      for (int64_t i = 0; i < m * n; ++i) {
        if (!(std::fabs(c[i] - want.value[i]) <= 1e-5 * want.scale[i])) {
          ++failures;
          break;
        }
      }
      if (shared == nullptr && cublasDestroy(handle) != CUBLAS_STATUS_SUCCESS) ++failures;
    }
    if (shared == nullptr) cudaStreamDestroy(stream);
  };
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const int64_t live = cudaemu::testing::CublasLiveHandles();
  cublasHandle_t shared;
  ASSERT_EQ(cublasCreate(&shared), CUBLAS_STATUS_SUCCESS);
  cudaStream_t shared_stream;
  ASSERT_EQ(cudaStreamCreate(&shared_stream), cudaSuccess);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t % 2, nullptr, nullptr);
  for (int t = 0; t < 2; ++t) threads.emplace_back(worker, 0, shared, shared_stream);
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(cublasDestroy(shared), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaStreamDestroy(shared_stream), cudaSuccess);
  EXPECT_EQ(cudaemu::testing::CublasLiveHandles(), live);
}

}  // namespace
