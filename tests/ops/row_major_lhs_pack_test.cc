// PackRowMajorLhs (ops/cpu/row_major_lhs_pack.h) against Eigen's own packing of a row-major lhs,
// byte for byte: whole kernel panels, every narrower panel Eigen packs the last rows in, depths
// that are and are not whole vectors, a stride wider than the depth; and nothing written past
// the packed floats.
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <Eigen/Core>
#include <gtest/gtest.h>

#include "ops/cpu/row_major_lhs_pack.h"
#include "tests/testing/random_values.h"

namespace tower {
namespace {

using Index = Eigen::Index;
using Traits = Eigen::internal::gebp_traits<float, float>;
using Mapper = Eigen::internal::const_blas_data_mapper<float, Index, Eigen::RowMajor>;
using Floats = std::vector<float, Eigen::aligned_allocator<float>>;

// Eigen's packing, as its GEMM calls it for a row-major lhs.
void EigensPack(const float* lhs, Index stride, Index rows, Index depth, float* packed) {
  Eigen::internal::gemm_pack_lhs<float, Index, Mapper, Traits::mr, Traits::LhsProgress,
                                 Traits::LhsPacket4Packing, Eigen::RowMajor>
      pack;
  pack(packed, Mapper(lhs, stride), depth, rows);
}

constexpr Index kGuard = 64;  // floats after the packed ones that must stay untouched

Floats Packed(bool ours, const std::vector<float>& lhs, Index stride, Index rows, Index depth) {
  Floats packed(static_cast<size_t>(rows * depth + kGuard),
                std::numeric_limits<float>::quiet_NaN());
  if (ours) {
    cpu::PackRowMajorLhs(lhs.data(), stride, rows, depth, packed.data());
  } else {
    EigensPack(lhs.data(), stride, rows, depth, packed.data());
  }
  return packed;
}

TEST(RowMajorLhsPackTest, WritesEigensBytesForEveryPanelWidthAndDepth) {
  const Index mr = Traits::mr;
  // Whole panels; one, two and three panels plus every narrower panel Eigen uses (2 and 1
  // vectors, half and quarter vectors, single rows) and one row short of a panel.
  const Index row_counts[] = {1,          2,          3,          7,      15,         16,
                              17,         31,         32,         mr - 1, mr,         mr + 1,
                              mr + 16,    mr + 33,    2 * mr - 1, 2 * mr, 3 * mr + 5, 1024};
  // Depths below a vector, whole vectors, and past them by one to a vector less one; Eigen's
  // depth block of a 1024-deep product (520) and the rest of it (504).
  const Index depths[] = {1, 3, 8, 15, 16, 17, 31, 33, 100, 504, 520};
  int compared = 0;
  for (const Index rows : row_counts) {
    for (const Index depth : depths) {
      for (const Index pad : {Index{0}, Index{5}}) {
        const Index stride = depth + pad;
        const std::vector<float> lhs = testing::UniformValues(rows * stride, 7 + compared);
        const Floats want = Packed(false, lhs, stride, rows, depth);
        const Floats got = Packed(true, lhs, stride, rows, depth);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << rows << " rows, depth " << depth << ", stride " << stride;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 18 * 11 * 2);
}

// The packed floats are the lhs's values, each once: a check of the comparison above that
// does not lean on Eigen (its packing of a panel is the transposed block).
TEST(RowMajorLhsPackTest, AFullPanelIsItsRowsTransposed) {
  const Index mr = Traits::mr, depth = 37, stride = 40;
  std::vector<float> lhs(static_cast<size_t>(mr * stride));
  for (Index r = 0; r < mr; ++r) {
    for (Index k = 0; k < stride; ++k) lhs[r * stride + k] = static_cast<float>(r * 1000 + k);
  }
  const Floats packed = Packed(true, lhs, stride, mr, depth);
  for (Index k = 0; k < depth; ++k) {
    for (Index r = 0; r < mr; ++r) {
      ASSERT_EQ(packed[k * mr + r], static_cast<float>(r * 1000 + k)) << "row " << r << " k " << k;
    }
  }
}

}  // namespace
}  // namespace tower
