// The safetensors format (https://github.com/huggingface/safetensors), on the host:
//
//   [8 bytes: N, little-endian u64][N bytes: JSON header][data]
//   header = {"__metadata__": {"k": "v"},
//             "layers.0.kernel": {"dtype": "F32", "shape": [256, 1024],
//                                 "data_offsets": [0, 1048576]}, ...}
//
// Offsets are relative to the data section, which the tensors cover exactly, packed in
// order. Our files pad the header with spaces to a multiple of 8 bytes, as the reference
// writer does, so Python's `safetensors` reads them.
//
// Save is atomic (a temporary file in the same directory, fsync, rename, fsync of the
// directory): a crash leaves the old file or the new one, never half of one. Load checks
// everything a hostile or damaged file could get wrong and says what, naming the file.
#ifndef TOWER_MODEL_CHECKPOINT_SAFETENSORS_H_
#define TOWER_MODEL_CHECKPOINT_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/statusor.h"

namespace tower::checkpoint {

enum class DType { kF32, kF16, kBF16, kI32, kI64, kU8, kF64 };

// "F32", "F16", "BF16", "I32", "I64", "U8", "F64".
std::string_view DTypeName(DType dtype);
std::optional<DType> ParseDType(std::string_view name);
size_t ElementSize(DType dtype);

struct TensorData {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // [] is a scalar
  std::vector<uint8_t> bytes;  // little-endian, row-major
};

struct File {
  std::vector<TensorData> tensors;              // in data order
  std::map<std::string, std::string> metadata;  // "__metadata__" (string values only)
  const TensorData* Find(std::string_view name) const;
};

// The file's bytes (header padded with spaces to a multiple of 8). Names must be unique and
// non-empty and each tensor's bytes must match its shape; otherwise InvalidArgument.
StatusOr<std::string> Serialize(const File& file);
// Writes atomically; on failure `path` is untouched and no temporary file remains.
Status Save(const std::string& path, const File& file);
// Reads and validates (see the header comment). NotFound for a missing file.
StatusOr<File> Load(const std::string& path);
// The same, from bytes in memory (fuzzing, tests); `source` names them in errors.
StatusOr<File> Parse(std::string_view bytes, std::string_view source = "<memory>");

TensorData FromFloats(std::string name, std::vector<int64_t> shape,
                      const std::vector<float>& values);
// The values of an F32 tensor.
StatusOr<std::vector<float>> ToFloats(const TensorData& tensor);

namespace internal {
// Test hook: makes the next Save fail after writing `bytes` bytes of the temporary file
// (-1 = off), to show that a failed write leaves the previous file intact.
void FailNextSaveAfterBytesForTesting(int64_t bytes);
}  // namespace internal

}  // namespace tower::checkpoint

#endif  // TOWER_MODEL_CHECKPOINT_SAFETENSORS_H_
