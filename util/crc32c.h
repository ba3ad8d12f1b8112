// CRC-32C (Castagnoli, the iSCSI polynomial 0x1EDC6F41, reflected; RFC 3720), as TFRecord
// files (TensorBoard's event files) checksum their records, and TFRecord's mask of it. A thin
// wrapper over Intel ISA-L's crc32_iscsi, which uses the CPU's crc32 instruction.
#ifndef TOWER_UTIL_CRC32C_H_
#define TOWER_UTIL_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace tower {

// The standard CRC-32C of `size` bytes: initial value 0xFFFFFFFF, final XOR 0xFFFFFFFF
// (CRC-32C("123456789") = 0xE3069283).
uint32_t Crc32c(const void* data, size_t size);

// TFRecord's masked CRC, ((crc >> 15) | (crc << 17)) + 0xA282EAD8 (mod 2^32): a CRC stored
// next to data that itself holds CRCs no longer checks as one. UnmaskCrc32c undoes it.
uint32_t MaskCrc32c(uint32_t crc);
uint32_t UnmaskCrc32c(uint32_t masked);
// MaskCrc32c(Crc32c(data, size)): what a TFRecord stores.
uint32_t MaskedCrc32c(const void* data, size_t size);

}  // namespace tower

#endif  // TOWER_UTIL_CRC32C_H_
