// Portable fp16 (IEEE binary16) and bfloat16 <-> fp32 conversions, bit by bit, for
// the scalar kernel set. Narrowing rounds to nearest even, keeps denormals, and turns
// NaN into a quiet NaN of the same sign (the top payload bits kept), which is what
// F16C's vcvtps2ph does, so the scalar and SIMD sets agree.
#pragma once

#include <cstdint>
#include <cstring>

namespace weft::reduce {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {  // Inf, or NaN made quiet
    return bits_float(sign | 0x7f800000u | (mant << 13) | (mant != 0 ? 0x400000u : 0u));
  }
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // Subnormal half: mant * 2^-24. Normalize so the leading 1 sits at bit 10.
    int e = -14;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    mant &= 0x3ffu;
    return bits_float(sign | (static_cast<uint32_t>(e + 127) << 23) | (mant << 13));
  }
  return bits_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // Inf or NaN
    if (a == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to Inf
  const uint32_t e = a >> 23;
  if (e < 113) {  // below 2^-14: a subnormal half or zero
    if (e < 102) return sign;  // below 2^-25: rounds to zero
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;  // may carry into 2^-14: fine
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = ((e - 112) << 10) | ((a >> 13) & 0x3ffu);
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // a carry bumps the exponent
  return static_cast<uint16_t>(sign | r);
}

inline float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  // Round to nearest even on the 16 dropped bits; a carry rolls into the exponent,
  // up to Inf, as IEEE rounding says.
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace weft::reduce
