#include "model/precision.h"

namespace tower {

StatusOr<PrecisionPolicy> ParsePrecisionPolicy(std::string_view name) {
  if (name == "float32") return PrecisionPolicy::kFloat32;
  if (name == "mixed_bfloat16") return PrecisionPolicy::kMixedBFloat16;
  if (name == "mixed_float16") return PrecisionPolicy::kMixedFloat16;
  return InvalidArgumentError("unknown precision policy '" + std::string(name) +
                              "'; use float32, mixed_bfloat16 or mixed_float16");
}

std::string_view PrecisionPolicyName(PrecisionPolicy policy) {
  switch (policy) {
    case PrecisionPolicy::kFloat32: return "float32";
    case PrecisionPolicy::kMixedBFloat16: return "mixed_bfloat16";
    case PrecisionPolicy::kMixedFloat16: return "mixed_float16";
  }
  return "?";
}

DType ComputeDType(PrecisionPolicy policy) {
  switch (policy) {
    case PrecisionPolicy::kFloat32: return DType::kFloat32;
    case PrecisionPolicy::kMixedBFloat16: return DType::kBFloat16;
    case PrecisionPolicy::kMixedFloat16: return DType::kFloat16;
  }
  return DType::kFloat32;
}

}  // namespace tower
