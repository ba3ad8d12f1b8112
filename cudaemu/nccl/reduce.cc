#include "cudaemu/nccl/reduce.h"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace cudaemu::nccl {

size_t TypeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

bool ValidOp(ncclRedOp_t op) {
  return op == ncclSum || op == ncclProd || op == ncclMax || op == ncclMin || op == ncclAvg;
}

const char* TypeName(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
      return "ncclInt8";
    case ncclUint8:
      return "ncclUint8";
    case ncclInt32:
      return "ncclInt32";
    case ncclUint32:
      return "ncclUint32";
    case ncclInt64:
      return "ncclInt64";
    case ncclUint64:
      return "ncclUint64";
    case ncclFloat16:
      return "ncclFloat16";
    case ncclFloat32:
      return "ncclFloat32";
    case ncclFloat64:
      return "ncclFloat64";
    case ncclBfloat16:
      return "ncclBfloat16";
    case ncclFloat8e4m3:
      return "ncclFloat8e4m3";
    case ncclFloat8e5m2:
      return "ncclFloat8e5m2";
    default:
      return "an unknown type";
  }
}

const char* OpName(ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
      return "ncclSum";
    case ncclProd:
      return "ncclProd";
    case ncclMax:
      return "ncclMax";
    case ncclMin:
      return "ncclMin";
    case ncclAvg:
      return "ncclAvg";
    default:
      return "an unknown op";
  }
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float value = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -value : value;
  }
  uint32_t bits;
  if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // to infinity
  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half (or zero)
    float a;
    std::memcpy(&a, &magnitude, sizeof(a));
    const float units = std::nearbyint(a * 16777216.0f);  // in units of 2^-24, exact scaling
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(units));
  }
  const uint32_t exponent = (magnitude >> 23) - 127 + 15;
  const uint32_t mantissa = magnitude & 0x7fffffu;
  uint32_t h = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0)) ++h;  // may carry into exponent
  return static_cast<uint16_t>(sign | h);
}

float Bfloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t FloatToBfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

namespace {

// How one element type is loaded, computed with and stored: the computation type of
// half-precision types is float, rounded back after every step as the device would.
template <typename T>
struct Plain {
  using Stored = T;
  using Compute = T;
  static Compute Load(Stored v) { return v; }
  static Stored Store(Compute v) { return v; }
};
struct Half {
  using Stored = uint16_t;
  using Compute = float;
  static Compute Load(Stored v) { return HalfToFloat(v); }
  static Stored Store(Compute v) { return FloatToHalf(v); }
};
struct Bfloat16 {
  using Stored = uint16_t;
  using Compute = float;
  static Compute Load(Stored v) { return Bfloat16ToFloat(v); }
  static Stored Store(Compute v) { return FloatToBfloat16(v); }
};

template <typename C>
C Add(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename C>
C Mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    // Promotion to int would make a uint16 product overflow a signed int: go through uint64.
    return static_cast<C>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  } else {
    return a * b;
  }
}

template <typename Traits, typename Fn>
void Fold(const std::vector<const char*>& in, char* out, size_t count, Fn fn) {
  using S = typename Traits::Stored;
  // The inputs are library buffers (std::vector storage): aligned for any element type.
  S* result = reinterpret_cast<S*>(out);
  const S* first = reinterpret_cast<const S*>(in[0]);
  if (out != in[0]) std::memcpy(result, first, count * sizeof(S));
  for (size_t r = 1; r < in.size(); ++r) {
    const S* next = reinterpret_cast<const S*>(in[r]);
    for (size_t i = 0; i < count; ++i) {
      result[i] = Traits::Store(fn(Traits::Load(result[i]), Traits::Load(next[i])));
    }
  }
}

template <typename Traits>
void ReduceTyped(const std::vector<const char*>& in, char* out, size_t count, ncclRedOp_t op) {
  using C = typename Traits::Compute;
  using S = typename Traits::Stored;
  switch (op) {
    case ncclSum:
      Fold<Traits>(in, out, count, [](C a, C b) { return Add(a, b); });
      return;
    case ncclProd:
      Fold<Traits>(in, out, count, [](C a, C b) { return Mul(a, b); });
      return;
    case ncclMax:
      Fold<Traits>(in, out, count, [](C a, C b) { return b > a ? b : a; });
      return;
    case ncclMin:
      Fold<Traits>(in, out, count, [](C a, C b) { return b < a ? b : a; });
      return;
    case ncclAvg: {
      const int n = static_cast<int>(in.size());
      S* result = reinterpret_cast<S*>(out);
      if constexpr (std::is_integral_v<C>) {
        Fold<Traits>(in, out, count, [](C a, C b) { return Add(a, b); });
        for (size_t i = 0; i < count; ++i) {
          result[i] = Traits::Store(static_cast<C>(Traits::Load(result[i]) / static_cast<C>(n)));
        }
      } else {
        // Pre-multiplied sum: sum over r of (x_r * (1/n)), the scale rounded to the type.
        const C scale = Traits::Load(Traits::Store(static_cast<C>(1) / static_cast<C>(n)));
        const S* first = reinterpret_cast<const S*>(in[0]);
        for (size_t i = 0; i < count; ++i) {
          result[i] = Traits::Store(Traits::Load(first[i]) * scale);
        }
        for (size_t r = 1; r < in.size(); ++r) {
          const S* next = reinterpret_cast<const S*>(in[r]);
          for (size_t i = 0; i < count; ++i) {
            const C scaled = Traits::Load(Traits::Store(Traits::Load(next[i]) * scale));
            result[i] = Traits::Store(Traits::Load(result[i]) + scaled);
          }
        }
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace

void ReduceInRankOrder(const std::vector<const char*>& in, char* out, size_t count,
                       ncclDataType_t type, ncclRedOp_t op) {
  if (in.empty() || count == 0) return;
  switch (type) {
    case ncclInt8:
      ReduceTyped<Plain<int8_t>>(in, out, count, op);
      return;
    case ncclUint8:
      ReduceTyped<Plain<uint8_t>>(in, out, count, op);
      return;
    case ncclInt32:
      ReduceTyped<Plain<int32_t>>(in, out, count, op);
      return;
    case ncclUint32:
      ReduceTyped<Plain<uint32_t>>(in, out, count, op);
      return;
    case ncclInt64:
      ReduceTyped<Plain<int64_t>>(in, out, count, op);
      return;
    case ncclUint64:
      ReduceTyped<Plain<uint64_t>>(in, out, count, op);
      return;
    case ncclFloat16:
      ReduceTyped<Half>(in, out, count, op);
      return;
    case ncclBfloat16:
      ReduceTyped<Bfloat16>(in, out, count, op);
      return;
    case ncclFloat32:
      ReduceTyped<Plain<float>>(in, out, count, op);
      return;
    case ncclFloat64:
      ReduceTyped<Plain<double>>(in, out, count, op);
      return;
    default:
      return;
  }
}

}  // namespace cudaemu::nccl
