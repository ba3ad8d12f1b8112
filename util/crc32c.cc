#include "util/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace tower {
namespace {

constexpr uint32_t kMaskDelta = 0xA282EAD8u;

}  // namespace

uint32_t Crc32c(const void* data, size_t size) {
  // ISA-L's crc32_iscsi is the bare CRC register: the caller passes the initial value and
  // inverts the result (crc32_iscsi("123456789", 9, 0xFFFFFFFF) = ~0xE3069283). Its length
  // is an int: longer buffers go in pieces, the register carried from one to the next.
  auto* bytes = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t crc = 0xFFFFFFFFu;
  while (size > 0) {
    const size_t piece = std::min<size_t>(size, INT_MAX);
    crc = crc32_iscsi(bytes, static_cast<int>(piece), crc);
    bytes += piece;
    size -= piece;
  }
  return ~crc;
}

uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rotated = masked - kMaskDelta;
  return (rotated >> 17) | (rotated << 15);
}

uint32_t MaskedCrc32c(const void* data, size_t size) { return MaskCrc32c(Crc32c(data, size)); }

}  // namespace tower
