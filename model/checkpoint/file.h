// A safetensors file's contents in memory: named tensors (dtype, shape, little-endian
// bytes) and string metadata. Written and read by model/checkpoint/safetensors.h; shared
// with the header code (header.h) so that neither includes the other.
#ifndef TOWER_MODEL_CHECKPOINT_FILE_H_
#define TOWER_MODEL_CHECKPOINT_FILE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tower::checkpoint {

// A subset of safetensors' dtypes; files with others are rejected with their name.
enum class DType { kF32, kF16, kBF16, kI32, kI64, kU8, kF64 };

// "F32", "F16", "BF16", "I32", "I64", "U8", "F64" (the names safetensors uses); "?" for a
// value outside the enum.
std::string_view DTypeName(DType dtype);
// The inverse of DTypeName; nullopt for any other name.
std::optional<DType> ParseDType(std::string_view name);
// Bytes per element (4, 2, 2, 4, 8, 1, 8); 0 for a value outside the enum.
size_t ElementSize(DType dtype);

struct TensorData {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // [] is a scalar (one element)
  std::vector<uint8_t> bytes;  // little-endian, row-major; product(shape) * ElementSize(dtype)
};

struct File {
  std::vector<TensorData> tensors;              // in the file's data order
  std::map<std::string, std::string> metadata;  // "__metadata__" (string values only)
  // The tensor named `name`, or nullptr.
  const TensorData* Find(std::string_view name) const;
};

}  // namespace tower::checkpoint

#endif  // TOWER_MODEL_CHECKPOINT_FILE_H_
