#include "model/checkpoint/file.h"

namespace tower::checkpoint {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "F32", 4}, {DType::kF16, "F16", 2}, {DType::kBF16, "BF16", 2},
    {DType::kI32, "I32", 4}, {DType::kI64, "I64", 8}, {DType::kU8, "U8", 1},
    {DType::kF64, "F64", 8},
};

}  // namespace

std::string_view DTypeName(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info.name;
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (name == info.name) return info.dtype;
  }
  return std::nullopt;
}

size_t ElementSize(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info.size;
  }
  return 0;
}

const TensorData* File::Find(std::string_view name) const {
  for (const TensorData& tensor : tensors) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

}  // namespace tower::checkpoint
