// Internal to //model/checkpoint: the safetensors header, written and read. Save, Load and
// Parse (safetensors.h) share these, so a file on disk and the same bytes in memory are
// checked by one code path and fail with one message.
#ifndef TOWER_MODEL_CHECKPOINT_HEADER_H_
#define TOWER_MODEL_CHECKPOINT_HEADER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/checkpoint/file.h"
#include "util/statusor.h"

namespace tower::checkpoint::internal {

// A tensor as the header describes it; its bytes are filled in later.
struct Entry {
  TensorData tensor;  // bytes still empty
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct Header {
  std::vector<Entry> entries;  // in data order (sorted by offsets)
  std::map<std::string, std::string> metadata;
};

// The 8-byte length and the JSON header (padded with spaces to a multiple of 8) for `file`,
// after checking it: InvalidArgument for an empty, reserved, duplicate or non-UTF-8 name,
// non-UTF-8 metadata, or bytes that do not match a tensor's shape.
StatusOr<std::string> EncodeHeader(const File& file);

// Checks the 8-byte length that starts a file of `file_size` bytes (`prefix`: its first
// bytes, up to 8) and returns the header's length. `where` names the file in errors.
StatusOr<uint64_t> HeaderLength(std::string_view prefix, uint64_t file_size,
                                const std::string& where);

// Parses and checks the JSON header, and that its tensors cover the `data_size` bytes of the
// data section exactly (no gap, no overlap, nothing missing or left over).
StatusOr<Header> ParseHeader(std::string_view json, uint64_t data_size, const std::string& where);

// product(shape) * element_size; nullopt on a negative dimension or past int64.
std::optional<uint64_t> ByteSize(const std::vector<int64_t>& shape, size_t element_size);

// "[2, 3]".
std::string ShapeText(const std::vector<int64_t>& shape);

// "tensor 'name'", the name cut short if it is huge.
std::string TensorLabel(std::string_view name);

}  // namespace tower::checkpoint::internal

#endif  // TOWER_MODEL_CHECKPOINT_HEADER_H_
