#include "ops/cpu/row_major_lhs_pack.h"

#include <Eigen/Core>

namespace tower::cpu {
namespace {

using Index = Eigen::Index;
using Traits = Eigen::internal::gebp_traits<float, float>;
using Packet = Traits::LhsPacket4Packing;
constexpr int kWidth = Eigen::internal::unpacket_traits<Packet>::size;  // floats per vector
constexpr int kPanelRows = Traits::mr;                                   // 3 vectors' rows
static_assert(kPanelRows % kWidth == 0, "a kernel panel is whole vectors of rows");
constexpr int kGroups = kPanelRows / kWidth;

using Mapper = Eigen::internal::const_blas_data_mapper<float, Index, Eigen::RowMajor>;
using EigensPack = Eigen::internal::gemm_pack_lhs<float, Index, Mapper, Traits::mr,
                                                  Traits::LhsProgress, Packet, Eigen::RowMajor>;

// One full panel: rows [0, kPanelRows) of `panel` into dst[k * kPanelRows + r]. Each group of
// kWidth rows is read on its own, kWidth columns at a time, transposed in registers and stored
// as kWidth vectors, one per k.
void PackPanel(const float* panel, Index stride, Index depth, float* dst) {
  for (int g = 0; g < kGroups; ++g) {
    const float* rows = panel + Index{g} * kWidth * stride;
    float* out = dst + g * kWidth;
    Index k = 0;
    for (; k + kWidth <= depth; k += kWidth) {
      Eigen::internal::PacketBlock<Packet, kWidth> block;
      for (int r = 0; r < kWidth; ++r) {
        block.packet[r] = Eigen::internal::ploadu<Packet>(rows + r * stride + k);
      }
      Eigen::internal::ptranspose(block);
      for (int j = 0; j < kWidth; ++j) {
        Eigen::internal::pstore(out + (k + j) * kPanelRows, block.packet[j]);
      }
    }
    for (; k < depth; ++k) {  // the depth past whole vectors
      for (int r = 0; r < kWidth; ++r) out[k * kPanelRows + r] = rows[r * stride + k];
    }
  }
}

}  // namespace

void PackRowMajorLhs(const float* lhs, int64_t stride, int64_t rows, int64_t depth,
                     float* packed) {
  const Index full_rows = rows / kPanelRows * kPanelRows;
  for (Index i = 0; i < full_rows; i += kPanelRows) {
    PackPanel(lhs + i * stride, stride, depth, packed + i * depth);
  }
  // Eigen packs the rows past the full panels in narrower panels (2, then 1 vector, half and
  // quarter vectors, then single rows), right after them, as it does after its own full panels.
  if (full_rows < rows) {
    EigensPack pack;
    pack(packed + full_rows * depth, Mapper(lhs + full_rows * stride, stride), depth,
         rows - full_rows);
  }
}

}  // namespace tower::cpu
