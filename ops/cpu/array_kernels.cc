// CPU kernels that create, convert and join tensors: Fill, Cast, Concat, random values.
#include <cstring>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/eigen.h"
#include "ops/op_attrs.h"
#include "ops/philox.h"

namespace tower::cpu {

Status Fill(const KernelContext& ctx) {
  MutableFlat(ctx.output(0)).setConstant(ctx.attr<attrs::Scalar>().value);
  return OkStatus();
}

Status Concat(const KernelContext& ctx) {
  char* out = static_cast<char*>(ctx.output(0).raw_data());
  for (const Tensor* input : ctx.inputs) {
    if (input->bytes() > 0) std::memcpy(out, input->raw_data(), input->bytes());
    out += input->bytes();
  }
  return OkStatus();
}

namespace {

float LoadAsFloat(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: return static_cast<const float*>(t.raw_data())[i];
    case DType::kFloat16: return Float16ToFloat(static_cast<const uint16_t*>(t.raw_data())[i]);
    case DType::kBFloat16: return BFloat16ToFloat(static_cast<const uint16_t*>(t.raw_data())[i]);
    case DType::kInt32: return static_cast<float>(static_cast<const int32_t*>(t.raw_data())[i]);
  }
  return 0;
}

}  // namespace

// Every pair of dtypes, through float (int32 -> int32 copies exactly).
Status Cast(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t n = x.num_elements();
  if (x.dtype() == y.dtype()) {
    if (x.bytes() > 0) std::memcpy(y.raw_data(), x.raw_data(), x.bytes());
    return OkStatus();
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = LoadAsFloat(x, i);
    switch (y.dtype()) {
      case DType::kFloat32: static_cast<float*>(y.raw_data())[i] = v; break;
      case DType::kFloat16: static_cast<uint16_t*>(y.raw_data())[i] = FloatToFloat16(v); break;
      case DType::kBFloat16: static_cast<uint16_t*>(y.raw_data())[i] = FloatToBFloat16(v); break;
      case DType::kInt32: static_cast<int32_t*>(y.raw_data())[i] = SaturatingFloatToInt32(v); break;
    }
  }
  return OkStatus();
}

Status RandomUniform(const KernelContext& ctx) {
  const auto& random = ctx.attr<attrs::Random>();
  float* out = ctx.output(0).data<float>();
  const int64_t n = ctx.output(0).num_elements();
  for (int64_t i = 0; i < n; ++i) out[i] = philox::Uniform(random.seed, i, random.a, random.b);
  return OkStatus();
}

Status RandomNormal(const KernelContext& ctx) {
  const auto& random = ctx.attr<attrs::Random>();
  float* out = ctx.output(0).data<float>();
  const int64_t n = ctx.output(0).num_elements();
  for (int64_t i = 0; i < n; ++i) out[i] = philox::Normal(random.seed, i, random.a, random.b);
  return OkStatus();
}

}  // namespace tower::cpu
