// The arithmetic of the collectives: element sizes, and reductions in rank order.
#ifndef CUDAEMU_NCCL_REDUCE_H_
#define CUDAEMU_NCCL_REDUCE_H_

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cudaemu::nccl {

// Bytes per element, or 0 for a type the emulation does not reduce or move.
size_t TypeSize(ncclDataType_t type);
bool ValidOp(ncclRedOp_t op);
const char* TypeName(ncclDataType_t type);
const char* OpName(ncclRedOp_t op);

// out[i] = ((in[0][i] op in[1][i]) op in[2][i]) ... for i < count: every rank's input in rank
// order, the same association on every run. ncclAvg: floating types pre-multiply each input
// by 1/nranks (rounded to the type) and sum; integer types sum and divide, as NCCL does.
// Integer sums and products wrap. `out` may be in[0].
void ReduceInRankOrder(const std::vector<const char*>& in, char* out, size_t count,
                       ncclDataType_t type, ncclRedOp_t op);

// IEEE half and bfloat16 (round to nearest even).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bfloat16ToFloat(uint16_t b);
uint16_t FloatToBfloat16(float f);

}  // namespace cudaemu::nccl

#endif  // CUDAEMU_NCCL_REDUCE_H_
