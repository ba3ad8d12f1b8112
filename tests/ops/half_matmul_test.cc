// 16-bit matrix products (ops::MatMul on bfloat16 and float16, ops/cpu/half_matmul.h)
// against a double-precision product of the same 16-bit values: every transpose, odd
// shapes, a float32 or 16-bit result, split over 1 to 3 intra-op threads.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/context.h"
#include "device/intra_op.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"

namespace tower {
namespace {

using ::testing::HasSubstr;

Device* Cpu() { return *Context::Global().FindDevice("/CPU:0"); }

// Random values that the 16-bit type holds exactly (rounded through it), as float.
std::vector<float> RandomHalfValues(int64_t n, DType dtype, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(-2, 2);
  std::vector<float> out(static_cast<size_t>(n));
  for (float& v : out) {
    const float x = uniform(random);
    v = dtype == DType::kBFloat16 ? BFloat16ToFloat(FloatToBFloat16(x))
                                  : Float16ToFloat(FloatToFloat16(x));
  }
  return out;
}

Tensor Half(const Shape& shape, const std::vector<float>& values, DType dtype) {
  return *ops::Cast(*Tensor::FromHost(Cpu(), shape, values), dtype);
}

std::vector<float> AsFloat(const Tensor& t) {
  return *(t.dtype() == DType::kFloat32 ? t : *ops::Cast(t, DType::kFloat32)).ToHost();
}

struct Case {
  int64_t m, k, n;
};

TEST(HalfMatMulTest, ProductsOfSixteenBitValuesAccumulateInFloat32) {
  const Case cases[] = {{1, 1, 1}, {3, 5, 7}, {64, 256, 1024}, {33, 130, 129}, {128, 64, 1}};
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (const Case& c : cases) {
      for (int ta = 0; ta < 2; ++ta) {
        for (int tb = 0; tb < 2; ++tb) {
          for (int threads : {1, 3}) {
            ScopedIntraOpThreads budget(threads);
            const std::vector<float> a = RandomHalfValues(c.m * c.k, dtype, 1 + c.m);
            const std::vector<float> b = RandomHalfValues(c.k * c.n, dtype, 2 + c.n);
            const Tensor ta_t = Half(ta ? Shape{c.k, c.m} : Shape{c.m, c.k}, a, dtype);
            const Tensor tb_t = Half(tb ? Shape{c.n, c.k} : Shape{c.k, c.n}, b, dtype);
            const std::string what = std::string(DTypeName(dtype)) + " " +
                                     std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                                     std::to_string(c.n) + (ta ? " aT" : "") +
                                     (tb ? " bT" : "") + ", threads " +
                                     std::to_string(threads);
            StatusOr<Tensor> wide = ops::MatMul(ta_t, tb_t, ta, tb, DType::kFloat32);
            StatusOr<Tensor> narrow = ops::MatMul(ta_t, tb_t, ta, tb);
            ASSERT_TRUE(wide.ok()) << what << ": " << wide.status().message();
            ASSERT_TRUE(narrow.ok()) << what << ": " << narrow.status().message();
            EXPECT_EQ(wide->dtype(), DType::kFloat32);
            EXPECT_EQ(narrow->dtype(), dtype);
            const std::vector<float> got = AsFloat(*wide);
            const std::vector<float> got16 = AsFloat(*narrow);
            // Each product is exact in float32; the k-term sum rounds at most k times: error
            // ≤ k·2⁻²⁴·Σ|a·b| (a loose bound that still catches a wrong element).
            for (int64_t i = 0; i < c.m; ++i) {
              for (int64_t j = 0; j < c.n; ++j) {
                double sum = 0, magnitude = 0;
                for (int64_t p = 0; p < c.k; ++p) {
                  const double x = ta ? a[p * c.m + i] : a[i * c.k + p];
                  const double y = tb ? b[j * c.k + p] : b[p * c.n + j];
                  sum += x * y;
                  magnitude += std::fabs(x * y);
                }
                const double bound = c.k * std::ldexp(1.0, -24) * magnitude + 1e-30;
                const float v = got[i * c.n + j];
                ASSERT_LE(std::fabs(v - sum), bound)
                    << what << " element " << i << "," << j << ": " << v << " vs " << sum;
                // Rounded once more to the 16-bit type: half an ulp of it (2⁻⁸ for bfloat16,
                // 2⁻¹¹ for float16, relative) on top.
                const double ulp = dtype == DType::kBFloat16 ? std::ldexp(1.0, -8)
                                                             : std::ldexp(1.0, -11);
                const float v16 = got16[i * c.n + j];
                ASSERT_LE(std::fabs(v16 - sum), bound + ulp * std::fabs(sum) + 1e-30)
                    << what << " (16-bit result) element " << i << "," << j << ": " << v16
                    << " vs " << sum;
              }
            }
          }
        }
      }
    }
  }
}

TEST(HalfMatMulTest, TheSameCallTwiceGivesTheSameBits) {
  const std::vector<float> a = RandomHalfValues(96 * 512, DType::kBFloat16, 7);
  const std::vector<float> b = RandomHalfValues(512 * 640, DType::kBFloat16, 8);
  const Tensor ta = Half(Shape{96, 512}, a, DType::kBFloat16);
  const Tensor tb = Half(Shape{512, 640}, b, DType::kBFloat16);
  ScopedIntraOpThreads budget(2);
  const std::vector<float> first = *ops::MatMul(ta, tb, false, false, DType::kFloat32)->ToHost();
  const std::vector<float> second = *ops::MatMul(ta, tb, false, false, DType::kFloat32)->ToHost();
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
}

TEST(HalfMatMulTest, ConcurrentBlocksOfOneProductKeepTheirOwnScratchpads) {
  // Blocks of one product run at once on the intra-op threads; oneDNN's default scratchpad
  // is shared by the whole process, and with it these products came out wrong (relative
  // error ~1) in most runs.
  const int64_t m = 256, k = 256, n = 1024;
  const std::vector<float> a = RandomHalfValues(m * k, DType::kBFloat16, 11);
  const std::vector<float> b = RandomHalfValues(k * n, DType::kBFloat16, 12);
  const Tensor ta = Half(Shape{m, k}, a, DType::kBFloat16);
  const Tensor tb = Half(Shape{k, n}, b, DType::kBFloat16);
  std::vector<double> want(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) want[i * n + j] += double{a[i * k + p]} * b[p * n + j];
    }
  }
  for (int round = 0; round < 20; ++round) {
    ScopedIntraOpThreads budget(2 + round % 2);
    // A bfloat16 result: oneDNN accumulates the blocks in float32 in its scratchpad.
    const std::vector<float> got = AsFloat(*ops::MatMul(ta, tb));
    double error = 0, norm = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      error += (got[i] - want[i]) * (got[i] - want[i]);
      norm += want[i] * want[i];
    }
    // One rounding to bfloat16: at most 2⁻⁹ relative per element.
    ASSERT_LE(std::sqrt(error / norm), 4e-3) << "round " << round;  // NaN fails too
  }
}

TEST(HalfMatMulTest, MixedOrUnsupportedTypesAreRefused) {
  const Tensor f = *Tensor::FromHost(Cpu(), Shape{2, 2}, std::vector<float>{1, 2, 3, 4});
  const Tensor h = *ops::Cast(f, DType::kBFloat16);
  EXPECT_THAT(ops::MatMul(f, h).status().message(),
              HasSubstr("must both be float32, both bfloat16 or both float16"));
  EXPECT_THAT(ops::MatMul(f, f, false, false, DType::kBFloat16).status().message(),
              HasSubstr("float32 · float32 -> bfloat16"));
  EXPECT_THAT(ops::MatMul(h, h, false, false, DType::kFloat16).status().message(),
              HasSubstr("bfloat16 · bfloat16 -> float16"));
}

}  // namespace
}  // namespace tower
