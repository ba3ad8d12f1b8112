// Splitting a CPU kernel's work over the intra-op threads of the call (device/intra_op.h).
// MatMul splits its output in blocks of its own (ops/cpu/math_kernels.cc); this is the split
// of elementwise kernels.
#ifndef TOWER_OPS_CPU_PARALLEL_H_
#define TOWER_OPS_CPU_PARALLEL_H_

#include <algorithm>
#include <cstdint>

#include "device/intra_op.h"

namespace tower::cpu {

// 256 KB of each operand per range at least: below that, handing out a range costs more than
// it saves (linreg's 64-row tensors never split).
inline constexpr int64_t kMinSplitElements = 1 << 16;

// Runs f(begin, end) over ranges that cover [0, n) for a kernel that writes n floats at
// `out`: once over everything when the call may use one thread or n < 2·min_elements, else
// over at most CurrentIntraOpThreads() ranges of at least min_elements each, in parallel.
// The ranges depend on n, the address of `out` and the budget only. Every range but the
// first starts on a 64-byte boundary of `out`: Eigen's vectorised loops align on their
// destination, so each element is computed by the same code (SIMD or scalar) as in one call
// over the whole array, and the result is the same bits for any thread count.
template <typename F>
void ParallelRanges(const float* out, int64_t n, int64_t min_elements, const F& f) {
  constexpr int64_t kAlignFloats = 16;  // 64 bytes
  int64_t chunks = 1;
  int64_t first = 0;  // elements before the first 64-byte boundary
  int64_t units = 0;  // whole 64-byte units after it
  if (n >= 2 * min_elements) {
    chunks = std::min<int64_t>(CurrentIntraOpThreads(), n / min_elements);
    const uintptr_t address = reinterpret_cast<uintptr_t>(out);
    if (address % sizeof(float) == 0) first = static_cast<int64_t>((64 - address % 64) % 64) / 4;
    units = (n - first) / kAlignFloats;
    chunks = std::min(chunks, units);
  }
  if (chunks < 2) {
    f(int64_t{0}, n);
    return;
  }
  // Chunk c starts at the unit boundary nearest to c/chunks of the way; the last ends at n.
  auto start = [&](int64_t c) -> int64_t {
    if (c == 0) return 0;
    if (c == chunks) return n;
    return first + kAlignFloats * ((2 * c * units + chunks) / (2 * chunks));
  };
  ParallelFor(static_cast<int>(chunks), [&](int c) { f(start(c), start(c + 1)); });
}

}  // namespace tower::cpu

#endif  // TOWER_OPS_CPU_PARALLEL_H_
