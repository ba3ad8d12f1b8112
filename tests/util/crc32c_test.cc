// CRC-32C against its published check values (RFC 3720 B.4, and the "123456789" check value
// of the CRC catalogue), and TFRecord's mask of it.
#include "util/crc32c.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tower {
namespace {

TEST(Crc32cTest, CheckValue) {
  const std::string check = "123456789";
  EXPECT_EQ(Crc32c(check.data(), check.size()), 0xE3069283u);
}

TEST(Crc32cTest, Rfc3720Vectors) {
  std::vector<uint8_t> bytes(32, 0x00);
  EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), 0x8A9136AAu);  // 32 bytes of zeros
  bytes.assign(32, 0xFF);
  EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), 0x62A8AB43u);  // 32 bytes of ones
  for (int i = 0; i < 32; ++i) bytes[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), 0x46DD794Eu);  // 0, 1, ..., 31
  for (int i = 0; i < 32; ++i) bytes[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), 0x113FDB5Cu);  // 31, 30, ..., 0
}

TEST(Crc32cTest, EmptyInput) { EXPECT_EQ(Crc32c(nullptr, 0), 0u); }

TEST(Crc32cTest, TfRecordMask) {
  // ((crc >> 15) | (crc << 17)) + 0xA282EAD8, worked by hand for the check value.
  EXPECT_EQ(MaskCrc32c(0xE3069283u), 0xC78AB0E5u);
  const std::string check = "123456789";
  EXPECT_EQ(MaskedCrc32c(check.data(), check.size()), 0xC78AB0E5u);
  // A TFRecord's length field: 10 as 8 little-endian bytes.
  const uint8_t length[8] = {10, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(Crc32c(length, 8), 0x5C6B4C1Eu);
  EXPECT_EQ(MaskedCrc32c(length, 8), 0x3ABFA3AEu);
  for (uint32_t crc : {0u, 1u, 0x80000000u, 0xFFFFFFFFu, 0xE3069283u, 0x12345678u}) {
    EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(crc)), crc) << crc;
    EXPECT_NE(MaskCrc32c(crc), crc) << crc;
  }
}

}  // namespace
}  // namespace tower
