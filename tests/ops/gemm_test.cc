// Tower's GEMM loop (ops/cpu/gemm.h): Eigen's bits for every layout, written over a result it
// never reads (NaN before) or added to one; a block leaves the rest of the result alone;
// column chunks that share the activations' packing pack each block once, in any order and
// on any threads, and give the whole product's bits; what Eigen multiplies another way is
// left to it. Eigen's own product is the reference for the bits, a double-precision loop
// the reference for the values.
#include "ops/cpu/gemm.h"

#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing/random_values.h"

namespace tower {
namespace {

using Values = std::vector<float>;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<const RowMajor>;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Case {
  int64_t m, k, n;
};

// The one-batch mlp's products (256 rows of a 1024-wide layer; its weight gradient, 256 deep),
// several of Eigen's depth and row blocks, odd sizes, the smallest GEMM Eigen runs.
const Case kCases[] = {{256, 1024, 1024}, {1024, 256, 1024}, {37, 333, 517}, {5, 1500, 700},
                       {300, 64, 1024},   {3, 700, 2},       {2, 2, 16},     {1000, 9, 3}};

struct Problem {
  Values a, b, c;  // c: the result before (accumulating), else NaN
  cpu::GemmOperands g;
};

Problem MakeProblem(const Case& c, bool transpose_a, bool transpose_b, bool accumulate) {
  Problem p;
  p.a = testing::UniformValues(c.m * c.k, 1);
  p.b = testing::UniformValues(c.k * c.n, 2);
  p.c = accumulate ? testing::UniformValues(c.m * c.n, 3) : Values(c.m * c.n, kNaN);
  p.g = {p.a.data(), p.b.data(), nullptr, c.m, c.n, c.k, transpose_a, transpose_b, accumulate};
  return p;
}

// op(a) · op(b) (+ c), as Eigen computes it.
Values EigensProduct(const Problem& p) {
  const cpu::GemmOperands& g = p.g;
  const Map a(p.a.data(), g.transpose_a ? g.k : g.m, g.transpose_a ? g.m : g.k);
  const Map b(p.b.data(), g.transpose_b ? g.n : g.k, g.transpose_b ? g.k : g.n);
  RowMajor out = g.accumulate ? RowMajor(Map(p.c.data(), g.m, g.n)) : RowMajor::Zero(g.m, g.n);
  if (g.transpose_a && g.transpose_b) {
    out.noalias() += a.transpose() * b.transpose();
  } else if (g.transpose_a) {
    out.noalias() += a.transpose() * b;
  } else if (g.transpose_b) {
    out.noalias() += a * b.transpose();
  } else {
    out.noalias() += a * b;
  }
  return Values(out.data(), out.data() + out.size());
}

// The largest |got - want| over about 32 rows of the result (every row of a short one), want
// in double; NaN where got has a NaN there.
double LargestError(const Problem& p, const Values& got) {
  const cpu::GemmOperands& g = p.g;
  double largest = 0;
  for (int64_t i = 0; i < g.m; i += std::max<int64_t>(1, g.m / 32)) {
    for (int64_t j = 0; j < g.n; ++j) {
      double want = g.accumulate ? p.c[i * g.n + j] : 0.0;
      for (int64_t d = 0; d < g.k; ++d) {
        const double a = p.a[g.transpose_a ? d * g.m + i : i * g.k + d];
        const double b = p.b[g.transpose_b ? j * g.k + d : d * g.n + j];
        want += a * b;
      }
      const double error = std::fabs(got[i * g.n + j] - want);
      if (!(error <= largest)) largest = error;  // a NaN error stays
    }
  }
  return largest;
}

TEST(GemmTest, GivesEigensBitsForEveryLayoutWrittenOrAccumulated) {
  for (const Case& c : kCases) {
    for (bool transpose_a : {false, true}) {
      for (bool transpose_b : {false, true}) {
        for (bool accumulate : {false, true}) {
          Problem p = MakeProblem(c, transpose_a, transpose_b, accumulate);
          Values got = p.c;
          p.g.out = got.data();
          ASSERT_TRUE(cpu::GemmBlock(p.g, 0, c.m, 0, c.n));
          const std::string what = std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                                   std::to_string(c.n) + " transpose_a " +
                                   std::to_string(transpose_a) + " transpose_b " +
                                   std::to_string(transpose_b) + " accumulate " +
                                   std::to_string(accumulate);
          EXPECT_EQ(got, EigensProduct(p)) << what;  // a NaN left anywhere fails it
          // Uniform values in [-1, 1): sums of k products, each rounded, then the sum.
          EXPECT_LE(LargestError(p, got), 1e-6 * static_cast<double>(c.k + 1)) << what;
        }
      }
    }
  }
}

// The block's bits are Eigen's for the block's own product (the kernel's tiles start at the
// block's edges); every other element is left as it was.
TEST(GemmTest, ABlockWritesItsOwnElementsOnly) {
  const Case c{70, 300, 200};
  const int64_t r0 = 8, r1 = 41, c0 = 48, c1 = 150;
  for (bool accumulate : {false, true}) {
    Problem p = MakeProblem(c, false, true, accumulate);
    // The block as a product of its own: rows r0..r1 of a, rows c0..c1 of b (transposed).
    Problem block = MakeProblem(Case{r1 - r0, c.k, c1 - c0}, false, true, accumulate);
    block.a.assign(p.a.begin() + r0 * c.k, p.a.begin() + r1 * c.k);
    block.b.assign(p.b.begin() + c0 * c.k, p.b.begin() + c1 * c.k);
    for (int64_t i = r0; i < r1; ++i) {
      for (int64_t j = c0; j < c1; ++j) block.c[(i - r0) * (c1 - c0) + j - c0] = p.c[i * c.n + j];
    }
    const Values want = EigensProduct(block);
    Values got = p.c;
    p.g.out = got.data();
    ASSERT_TRUE(cpu::GemmBlock(p.g, r0, r1, c0, c1));
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        const size_t at = static_cast<size_t>(i * c.n + j);
        const bool inside = i >= r0 && i < r1 && j >= c0 && j < c1;
        if (inside) {
          ASSERT_EQ(got[at], want[(i - r0) * (c1 - c0) + j - c0])
              << i << ", " << j << " accumulate " << accumulate;
        } else if (accumulate) {
          ASSERT_EQ(got[at], p.c[at]) << i << ", " << j;
        } else {
          ASSERT_TRUE(std::isnan(got[at])) << i << ", " << j << " was written";
        }
      }
    }
  }
}

std::atomic<int64_t> packed_blocks{0};
void CountPackedBlock(int64_t) { packed_blocks.fetch_add(1); }

// Column chunks as MatMul splits them: 48-aligned starts.
std::vector<int64_t> ChunkStarts(int64_t n, int chunks) {
  std::vector<int64_t> starts;
  for (int c = 0; c < chunks; ++c) starts.push_back(n * c / chunks / 48 * 48);
  starts.push_back(n);
  return starts;
}

TEST(GemmTest, ColumnChunksShareTheActivationsPackingAndGiveTheWholeProductsBits) {
  for (const Case& c : {Case{256, 1024, 1024}, Case{1024, 256, 1024}, Case{37, 333, 517}}) {
    for (bool transpose_a : {false, true}) {
      for (int chunks : {2, 3}) {
        for (bool on_threads : {false, true}) {
          Problem p = MakeProblem(c, transpose_a, false, false);
          const Values want = EigensProduct(p);
          Values got = p.c;
          p.g.out = got.data();
          const std::vector<int64_t> starts = ChunkStarts(c.n, chunks);
          cpu::SharedBlocks activations;
          ASSERT_TRUE(cpu::PrepareSharedActivations(p.g, starts[1] - starts[0], &activations));
          activations.before_packing = CountPackedBlock;
          packed_blocks = 0;
          const auto chunk = [&](int i) {
            EXPECT_TRUE(cpu::GemmBlock(p.g, 0, c.m, starts[i], starts[i + 1],
                                       cpu::GemmSharing{nullptr, &activations}));
          };
          if (on_threads) {
            std::vector<std::thread> threads;
            for (int i = 0; i < chunks; ++i) threads.emplace_back(chunk, i);
            for (std::thread& t : threads) t.join();
          } else {
            for (int i = chunks - 1; i >= 0; --i) chunk(i);  // the last chunk packs them all
          }
          const std::string what = std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                                   std::to_string(c.n) + " transpose_a " +
                                   std::to_string(transpose_a) + ", " + std::to_string(chunks) +
                                   " chunks" + (on_threads ? " on threads" : " in turn");
          EXPECT_EQ(got, want) << what;
          EXPECT_EQ(packed_blocks.load(), activations.count) << what << ": each block once";
          EXPECT_GE(activations.count, 1) << what;
        }
      }
    }
  }
}

TEST(GemmTest, ActivationsTooLargeToShareArePackedByEachChunk) {
  // 4096 rows × 1100 deep: 17.2 MiB packed, over kMaxSharedActivationBytes.
  const cpu::GemmOperands g{nullptr, nullptr, nullptr, 4096, 1024, 1100};
  cpu::SharedBlocks activations;
  EXPECT_FALSE(cpu::PrepareSharedActivations(g, 512, &activations));
  EXPECT_GT(4096 * 1100 * int64_t{sizeof(float)}, cpu::kMaxSharedActivationBytes);
  const cpu::GemmOperands fits{nullptr, nullptr, nullptr, 2048, 1024, 1100};
  EXPECT_TRUE(cpu::PrepareSharedActivations(fits, 512, &activations));
}

TEST(GemmTest, LeavesVectorsTinyBlocksAndNoDepthToEigen) {
  Values a(64 * 64, 1.0f), b(64 * 64, 1.0f), out(64 * 64, kNaN);
  const cpu::GemmOperands g{a.data(), b.data(), out.data(), 64, 64, 64};
  EXPECT_FALSE(cpu::GemmBlock(g, 0, 1, 0, 64));  // one row: a matrix-vector product
  EXPECT_FALSE(cpu::GemmBlock(g, 0, 64, 5, 6));  // one column
  const cpu::GemmOperands tiny{a.data(), b.data(), out.data(), 8, 8, 3};  // 8 + 8 + 3 < 20
  EXPECT_FALSE(cpu::GemmBlock(tiny, 0, 8, 0, 8));
  const cpu::GemmOperands no_depth{a.data(), b.data(), out.data(), 64, 64, 0};
  EXPECT_FALSE(cpu::GemmBlock(no_depth, 0, 64, 0, 64));
  for (float v : out) ASSERT_TRUE(std::isnan(v)) << "a block left to Eigen was written";
}

}  // namespace
}  // namespace tower
