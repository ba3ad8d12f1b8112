// Element types. Every op computes in float32; float16 and bfloat16 are storage types
// (Cast converts; the CPU kernels of mixed precision's ops widen them to float32 and round
// their results once back), int32 carries class labels.
#ifndef TOWER_OPS_DTYPE_H_
#define TOWER_OPS_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tower {

enum class DType : uint8_t { kFloat32, kFloat16, kBFloat16, kInt32 };

inline constexpr size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kInt32: return 4;
  }
  return 0;
}

// bfloat16 or float16: the 16-bit types of mixed precision.
inline constexpr bool Is16BitFloat(DType dtype) {
  return dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

// "float32", "float16", "bfloat16", "int32" (numpy's names, as TensorFlow prints them).
std::string_view DTypeName(DType dtype);

// float16 (IEEE half) and bfloat16 bit patterns <-> float, round to nearest even.
float Float16ToFloat(uint16_t bits);
uint16_t FloatToFloat16(float value);
inline float BFloat16ToFloat(uint16_t bits) {
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  __builtin_memcpy(&value, &word, 4);
  return value;
}
uint16_t FloatToBFloat16(float value);

// float -> int32 as Cast does it: toward zero, saturating at the int32 range, NaN -> 0.
inline int32_t SaturatingFloatToInt32(float value) {
  if (!(value == value)) return 0;
  if (value >= 2147483648.0f) return 2147483647;
  if (value <= -2147483648.0f) return -2147483647 - 1;
  return static_cast<int32_t>(value);
}

// The DType of a C++ element type.
template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };

}  // namespace tower

#endif  // TOWER_OPS_DTYPE_H_
