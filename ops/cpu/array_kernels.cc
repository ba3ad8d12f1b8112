// CPU kernels that create, convert and join tensors: Fill, Cast, Concat, random values.
#include <cstring>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/eigen.h"
#include "ops/op_attrs.h"
#include "util/philox.h"

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

// The four loops below are ops/dtype.h's scalar conversions written without branches, so
// that clang vectorises them (16 lanes with AVX-512: ~20-30x the scalar helpers). They are
// plain C++ on purpose: the CPU's own converters differ from the helpers at the edges
// (VCVTNEPS2BF16 flushes subnormal inputs to zero; VCVTPS2PH keeps NaN payloads, the helper
// drops them), and these give the helpers' bits for every one of the 2^32 floats (checked
// exhaustively when written; tests/ops/ops_cpu_test.cc checks the edges and random values).

void WidenBFloat16(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = BFloat16ToFloat(in[i]);
}

// Round to nearest even by adding 0x7fff plus the lowest kept bit; a NaN (which that sum
// could carry into Inf) keeps its top half with the quiet bit set.
void NarrowToBFloat16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t word;
    std::memcpy(&word, &in[i], 4);
    const uint32_t rounded = (word + 0x7fffu + ((word >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (word >> 16) | 0x40u;
    out[i] = static_cast<uint16_t>((word & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

// Exponent and mantissa shifted into place and rebiased (+112 in the exponent); Inf and NaN
// get float's all-ones exponent (+224), payload kept. A subnormal half m·2^-24 (or zero) is
// renormalised by float arithmetic, exactly: the word with exponent 113 and mantissa m << 13
// reads 2^-14 + m·2^-24, and subtracting 2^-14 leaves m·2^-24.
void WidenFloat16(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = in[i];
    const uint32_t sign = (bits & 0x8000u) << 16;
    const uint32_t shifted = (bits & 0x7fffu) << 13;
    const uint32_t exponent = shifted & 0x0f800000u;
    const uint32_t subnormal_word = shifted + (113u << 23);
    float subnormal;
    std::memcpy(&subnormal, &subnormal_word, 4);
    subnormal -= 6.103515625e-05f;  // 2^-14
    uint32_t subnormal_bits;
    std::memcpy(&subnormal_bits, &subnormal, 4);
    const uint32_t word = exponent == 0x0f800000u ? shifted + (224u << 23)
                          : exponent == 0         ? subnormal_bits
                                                  : shifted + (112u << 23);
    const uint32_t signed_word = word | sign;
    std::memcpy(&out[i], &signed_word, 4);
  }
}

// By magnitude:
//   >= 2^16: Inf, or a quiet NaN without payload (as the helper);
//   [2^-14, 2^16): normal halves: rebias the exponent (-112) and round the 13 dropped bits to
//     nearest even (+0xfff plus the lowest kept bit); the carry of a round-up may go on into
//     the exponent, which gives the next binade, or Inf from 65520 up (as the helper);
//   below 2^-14: subnormal halves, multiples of 2^-24, which is the float ulp of 0.5: the
//     FPU's own rounding of 0.5 + |x| (round to nearest even, the default mode) leaves the
//     half's bits m in 0.5's mantissa (m = 1024, the smallest normal half, when it rounds up).
void NarrowToFloat16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t word;
    std::memcpy(&word, &in[i], 4);
    const uint32_t sign = (word >> 16) & 0x8000u;
    const uint32_t abs = word & 0x7fffffffu;
    const uint32_t normal = (abs - (112u << 23) + 0xfffu + ((abs >> 13) & 1u)) >> 13;
    float magnitude;
    std::memcpy(&magnitude, &abs, 4);
    const float aligned = magnitude + 0.5f;
    uint32_t aligned_bits;
    std::memcpy(&aligned_bits, &aligned, 4);
    const uint32_t subnormal = aligned_bits - 0x3f000000u;  // the bits of 0.5f
    const uint32_t large = abs > 0x7f800000u ? 0x7e00u : 0x7c00u;
    const uint32_t half = abs >= 0x47800000u ? large
                          : abs < 0x38800000u ? subnormal
                                              : normal;
    out[i] = static_cast<uint16_t>(half | sign);
  }
}

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

void WidenToFloat(DType dtype, const uint16_t* in, float* out, int64_t n) {
  TOWER_CHECK(Is16BitFloat(dtype)) << "WidenToFloat of " << DTypeName(dtype);
  if (dtype == DType::kBFloat16) {
    WidenBFloat16(in, out, n);
  } else {
    WidenFloat16(in, out, n);
  }
}

void NarrowFromFloat(DType dtype, const float* in, uint16_t* out, int64_t n) {
  TOWER_CHECK(Is16BitFloat(dtype)) << "NarrowFromFloat to " << DTypeName(dtype);
  if (dtype == DType::kBFloat16) {
    NarrowToBFloat16(in, out, n);
  } else {
    NarrowToFloat16(in, out, n);
  }
}

// Every pair of dtypes, through float (int32 -> int32 copies exactly).
Status Cast(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t n = x.num_elements();
  if (x.dtype() == y.dtype()) {
    if (x.bytes() > 0) std::memcpy(y.raw_data(), x.raw_data(), x.bytes());
    return OkStatus();
  }
  // float32 <-> 16-bit, the casts of mixed precision (every layer's input and kernel, every
  // step): the vectorised loops, the same bits as the element loop below.
  if (x.dtype() == DType::kFloat32 && Is16BitFloat(y.dtype())) {
    NarrowFromFloat(y.dtype(), x.data<float>(), static_cast<uint16_t*>(y.raw_data()), n);
    return OkStatus();
  }
  if (Is16BitFloat(x.dtype()) && y.dtype() == DType::kFloat32) {
    WidenToFloat(x.dtype(), static_cast<const uint16_t*>(x.raw_data()), y.data<float>(), n);
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
