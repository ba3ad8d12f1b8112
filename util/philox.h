// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the
// generator TensorFlow and cuRAND use: counter-based, so element i of a random tensor is a
// function of (seed, i) alone. The same seed gives the same numbers on every device type and
// for any split of the work among threads.
//
// Bitwise equality between CPU and GPU also needs identical arithmetic: the float maps below
// use only exactly rounded IEEE operations (+, ·, /, fma, sqrt written out; no library
// log/cos, whose last bits differ between glibc and CUDA), and multiply-adds are explicit
// fma() so no compiler may contract or split them differently.
#ifndef TOWER_UTIL_PHILOX_H_
#define TOWER_UTIL_PHILOX_H_

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TOWER_HOST_DEVICE __host__ __device__
#else
#define TOWER_HOST_DEVICE
#endif

namespace tower::philox {

struct Block {
  uint32_t v[4];
};

TOWER_HOST_DEVICE inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  *lo = static_cast<uint32_t>(product);
}

// Philox4x32-10 of a 128-bit counter under a 64-bit key (Random123's philox4x32_R(10, ...)).
TOWER_HOST_DEVICE inline Block Philox4x32(Block counter, uint32_t key0, uint32_t key1) {
  uint32_t c0 = counter.v[0];
  uint32_t c1 = counter.v[1];
  uint32_t c2 = counter.v[2];
  uint32_t c3 = counter.v[3];
  uint32_t k0 = key0;
  uint32_t k1 = key1;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(0xD2511F53u, c0, &hi0, &lo0);
    MulHiLo(0xCD9E8D57u, c2, &hi1, &lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0;
    const uint32_t n1 = lo1;
    const uint32_t n2 = hi0 ^ c3 ^ k1;
    const uint32_t n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;  // the key schedule (the bump after the last round is unused)
    k1 += 0xBB67AE85u;
  }
  return Block{{c0, c1, c2, c3}};
}

// Four 32-bit random words for counter `counter` under key `seed`.
TOWER_HOST_DEVICE inline Block Generate(uint64_t seed, uint64_t counter) {
  const Block block{{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0}};
  return Philox4x32(block, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// A uniform float in [0, 1) from 24 random bits: k · 2^-24, exact.
TOWER_HOST_DEVICE inline float UnitFloat(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

// Element i of RandomUniform(seed) in [lo, hi).
TOWER_HOST_DEVICE inline float Uniform(uint64_t seed, uint64_t i, float lo, float hi) {
  const Block block = Generate(seed, i / 4);
  const float u = UnitFloat(block.v[i % 4]);
  return fmaf(u, hi - lo, lo);
}

// log(x) for x > 0 in double precision from exact operations: x = m·2^e with m in
// [√½, √2), log m = 2·atanh(s), s = (m−1)/(m+1), |s| < 0.172; 12 odd terms leave < 1e-17.
TOWER_HOST_DEVICE inline double PortableLog(double x) {
  int e = 0;
  double m = frexp(x, &e);  // x = m·2^e, m in [0.5, 1): exact
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    e -= 1;
  }
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double series = 1.0 / 23.0;
  for (int k = 21; k >= 1; k -= 2) series = fma(series, s2, 1.0 / k);
  const double log_m = 2.0 * s * series;
  return fma(static_cast<double>(e), 0.69314718055994530942, log_m);
}

// sin and cos of 2π·u for u in [0, 1): the quadrant from 4u (exact), then Taylor series
// on r in [0, π/2): sin to r^21, cos to r^22; the first omitted terms are below 2e-18.
TOWER_HOST_DEVICE inline void PortableSinCos2Pi(double u, double* sin_out, double* cos_out) {
  // (−1)^k/(2k+1)! for k = 10..0 and (−1)^k/(2k)! for k = 11..0: Horner from the top term.
  constexpr double kSin[11] = {1.9572941063391263e-20, -8.22063524662433e-18, 2.8114572543455206e-15, -7.647163731819816e-13, 1.6059043836821613e-10, -2.505210838544172e-08, 2.7557319223985893e-06, -0.0001984126984126984, 0.008333333333333333, -0.16666666666666666, 1.0};
  constexpr double kCos[12] = {-8.896791392450574e-22, 4.110317623312165e-19, -1.5619206968586225e-16, 4.779477332387385e-14, -1.1470745597729725e-11, 2.08767569878681e-09, -2.755731922398589e-07, 2.48015873015873e-05, -0.001388888888888889, 0.041666666666666664, -0.5, 1.0};
  const double t = 4.0 * u;
  const int quadrant = static_cast<int>(t);
  const double r = (t - quadrant) * 1.57079632679489661923;
  const double r2 = r * r;
  double sin_series = kSin[0];
  for (int k = 1; k < 11; ++k) sin_series = fma(sin_series, r2, kSin[k]);
  double cos_series = kCos[0];
  for (int k = 1; k < 12; ++k) cos_series = fma(cos_series, r2, kCos[k]);
  const double s = r * sin_series;
  const double c = cos_series;
  switch (quadrant & 3) {
    case 0: *sin_out = s; *cos_out = c; break;
    case 1: *sin_out = c; *cos_out = -s; break;
    case 2: *sin_out = -s; *cos_out = -c; break;
    default: *sin_out = -c; *cos_out = s; break;
  }
}

// Element i of RandomNormal(seed): Box–Muller on two uniforms of block i.
TOWER_HOST_DEVICE inline float Normal(uint64_t seed, uint64_t i, float mean, float stddev) {
  const Block block = Generate(seed ^ 0x5DEECE66Dull, i);
  // u1 in (0, 1] so that log(u1) is finite; u2 in [0, 1).
  const double u1 = (static_cast<double>(block.v[0] >> 8) + 1.0) * (1.0 / 16777216.0);
  const double u2 = static_cast<double>(block.v[1] >> 8) * (1.0 / 16777216.0);
  const double radius = sqrt(-2.0 * PortableLog(u1));
  double sin_value, cos_value;
  PortableSinCos2Pi(u2, &sin_value, &cos_value);
  const float z = static_cast<float>(radius * cos_value);
  return fmaf(z, stddev, mean);
}

}  // namespace tower::philox

#endif  // TOWER_UTIL_PHILOX_H_
