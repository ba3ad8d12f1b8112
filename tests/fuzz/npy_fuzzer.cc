// Fuzzes the NumPy readers' parsers (data/npy.h): the first input byte picks ParseNpyHeader
// (even: the rest is a .npy file) or ParseNpz (odd: the rest is a .npz archive, its zip
// directory and its members' headers).
//
// Invariants:
//  - an error is InvalidArgument, one line, starting with the file's name;
//  - an accepted .npy header has 1 or 2 dimensions, none negative, a dtype the reader
//    converts (f4, f8, i1..i8, u1..u8, b1), and a data offset within the bytes after which
//    exactly product(shape) * item size bytes follow. (The reader promises no alignment of
//    the data: NumPy pads the header so that the data starts at a multiple of 64 bytes, older
//    versions 16, but the reader accepts any, as rows are read with pread: none is checked);
//  - the header written again in np.save's form (version 1.0, the data at 64 bytes) before
//    the same data parses to the same dtype and shape;
//  - an accepted .npz has at least one member, each named "<file>:<name>", whose values lie
//    within the archive, and whose .npy bytes parse alone to the same header.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/npy.h"
#include "util/check.h"

namespace {

using tower::data::NpyArray;
using tower::data::NpyHeader;

constexpr char kNpyName[] = "fuzz.npy";
constexpr char kNpzName[] = "fuzz.npz";

void CheckError(const tower::Status& status, const std::string& name) {
  TOWER_CHECK(status.code() == tower::StatusCode::kInvalidArgument) << status.ToString();
  TOWER_CHECK(status.message().rfind(name, 0) == 0) << status.ToString();
  TOWER_CHECK(status.message().find('\n') == std::string::npos) << status.ToString();
}

// The .npy bytes of a header like `header` (np.save's form, version 1.0: the dict here is far
// below its 65535-byte limit) followed by `values`.
std::string Canonical(const NpyHeader& header, std::string_view values) {
  std::string dict = "{'descr': '";
  dict += header.item_bytes == 1 ? '|' : '<';
  dict += header.kind + std::to_string(header.item_bytes) + "', 'fortran_order': False, 'shape': (";
  for (const int64_t dim : header.shape) dict += std::to_string(dim) + ", ";
  dict.resize(dict.size() - (header.shape.size() == 2 ? 2 : 1));  // (3, 2) but (3,)
  dict += "), }";
  // Magic, version, length: 10 bytes; then the dict padded with spaces and a '\n' to 64.
  dict.append(63 - (10 + dict.size()) % 64, ' ');
  dict += '\n';
  std::string npy("\x93NUMPY\x01\x00", 8);
  npy += static_cast<char>(dict.size() & 0xFF);
  npy += static_cast<char>(dict.size() >> 8);
  return npy + dict + std::string(values);
}

void CheckHeader(const NpyHeader& header, std::string_view npy, const std::string& name) {
  TOWER_CHECK(header.shape.size() == 1 || header.shape.size() == 2)
      << name << ": " << header.shape.size() << " dimensions";
  const int b = header.item_bytes;
  const bool known =
      (header.kind == 'f' && (b == 4 || b == 8)) ||
      ((header.kind == 'i' || header.kind == 'u') && (b == 1 || b == 2 || b == 4 || b == 8)) ||
      (header.kind == 'b' && b == 1);
  TOWER_CHECK(known) << name << ": dtype " << header.kind << b;
  TOWER_CHECK(header.data_offset <= npy.size()) << name << ": data at " << header.data_offset;
  // Dimensions are at most 18 digits: the product cannot overflow 128 bits.
  unsigned __int128 values = 1;
  for (const int64_t dim : header.shape) {
    TOWER_CHECK(dim >= 0) << name << ": dimension " << dim;
    values *= static_cast<unsigned __int128>(dim);
    if (values > npy.size()) values = npy.size() + 1;  // too many already
  }
  TOWER_CHECK(values * static_cast<unsigned>(b) == npy.size() - header.data_offset)
      << name << ": the shape does not match the data's " << npy.size() - header.data_offset
      << " bytes";
}

void FuzzNpy(std::string_view npy) {
  auto header = tower::data::ParseNpyHeader(npy, kNpyName);
  if (!header.ok()) {
    CheckError(header.status(), std::string(kNpyName) + ": ");
    return;
  }
  CheckHeader(*header, npy, kNpyName);
  const std::string canonical = Canonical(*header, npy.substr(header->data_offset));
  auto again = tower::data::ParseNpyHeader(canonical, "canonical.npy");
  TOWER_CHECK(again.ok()) << again.status().ToString();
  TOWER_CHECK(again->kind == header->kind && again->item_bytes == header->item_bytes &&
              again->shape == header->shape)
      << "the header written again parses differently";
  TOWER_CHECK(again->data_offset % 64 == 0 &&
              canonical.size() - again->data_offset == npy.size() - header->data_offset);
}

void FuzzNpz(std::string_view npz) {
  auto arrays = tower::data::ParseNpz(npz, kNpzName);
  if (!arrays.ok()) {
    CheckError(arrays.status(), kNpzName);
    return;
  }
  TOWER_CHECK(!arrays->empty());
  for (const NpyArray& array : *arrays) {
    TOWER_CHECK(array.name.rfind(std::string(kNpzName) + ":", 0) == 0) << array.name;
    TOWER_CHECK(array.file == nullptr);
    TOWER_CHECK(array.offset >= array.header.data_offset && array.offset <= npz.size())
        << array.name << ": values at " << array.offset;
    // The member's .npy bytes: from its start to the end of its values.
    uint64_t values = array.header.item_bytes;
    for (const int64_t dim : array.header.shape) values *= static_cast<uint64_t>(dim);
    const size_t start = array.offset - array.header.data_offset;
    TOWER_CHECK(values <= npz.size() - array.offset) << array.name << ": values past the end";
    const std::string_view npy = npz.substr(start, array.header.data_offset + values);
    CheckHeader(array.header, npy, array.name);
    auto alone = tower::data::ParseNpyHeader(npy, array.name);
    TOWER_CHECK(alone.ok()) << alone.status().ToString();
    TOWER_CHECK(alone->kind == array.header.kind && alone->item_bytes == array.header.item_bytes &&
                alone->shape == array.header.shape &&
                alone->data_offset == array.header.data_offset)
        << array.name << ": parsed alone, the header differs";
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    FuzzNpy(rest);
  } else {
    FuzzNpz(rest);
  }
  return 0;
}
