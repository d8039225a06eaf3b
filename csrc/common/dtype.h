// Conversions between the 16-bit storage formats and float, usable on host and device.
// Portable bit manipulation, so the CPU reference needs no compiler half-float support.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define CULINA_HD __host__ __device__ __forceinline__
#else
#define CULINA_HD inline
#endif

namespace culina {

struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

CULINA_HD float bits_to_float(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

CULINA_HD uint32_t float_to_bits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}

CULINA_HD float to_float(float x) { return x; }

CULINA_HD float to_float(BFloat16 x) { return bits_to_float(uint32_t(x.bits) << 16); }

CULINA_HD float to_float(Half x) {
  const uint32_t sign = uint32_t(x.bits & 0x8000u) << 16;
  const uint32_t exponent = (x.bits >> 10) & 0x1fu;
  uint32_t mantissa = x.bits & 0x3ffu;
  if (exponent == 0x1f) return bits_to_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_to_float(sign);
  // Subnormal half: the value is mantissa * 2^-24, exact in float.
  const float magnitude = float(mantissa) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

template <typename T>
CULINA_HD T from_float(float x);

template <>
CULINA_HD float from_float<float>(float x) { return x; }

template <>
CULINA_HD BFloat16 from_float<BFloat16>(float x) {
  const uint32_t bits = float_to_bits(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return BFloat16{uint16_t((bits >> 16) | 0x40u)};  // NaN stays NaN
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return BFloat16{uint16_t(rounded >> 16)};
}

template <>
CULINA_HD Half from_float<Half>(float x) {
  const uint32_t bits = float_to_bits(x);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return Half{uint16_t(sign | 0x7e00u)};
  if (abs >= 0x477ff000u) return Half{uint16_t(sign | 0x7c00u)};  // rounds past 65504: infinity
  if (abs < 0x38800000u) {
    // Subnormal (or zero) in half: in units of the half subnormal step 2^-24 the value is
    // below 1024, and rintf rounds it to nearest even; 1024 carries into the smallest normal.
    return Half{uint16_t(sign | uint16_t(rintf(bits_to_float(abs) * 16777216.0f)))};
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return Half{uint16_t(sign | ((rounded - 0x38000000u) >> 13))};
}

}  // namespace culina
