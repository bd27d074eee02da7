// Portable fp16 (IEEE binary16), bfloat16 and fp8 <-> fp32 conversions, bit by bit,
// for the scalar kernel set. fp16/bf16 narrowing rounds to nearest even, keeps
// denormals, and turns NaN into a quiet NaN of the same sign (the top payload bits
// kept), which is what F16C's vcvtps2ph does, so the scalar and SIMD sets agree.
// fp8 narrowing rounds to nearest even and saturates (see float_to_fp8).
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

// The two OCP FP8 formats, laid out as CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2 and
// PyTorch's float8_e4m3fn / float8_e5m2 store them. E4M3 has no infinities and one
// NaN pattern per sign (S.1111.111); E5M2 has IEEE-style infinities and NaNs.
struct Fp8Format {
  uint32_t man_bits;
  uint32_t bias;
  bool ieee_specials;  // the all-ones exponent is Inf/NaN (E5M2), else only S.1111.111 is NaN
  uint8_t max_code;    // the largest finite magnitude: 448 (E4M3), 57344 (E5M2)
};
inline constexpr Fp8Format kE4M3{3, 7, false, 0x7e};
inline constexpr Fp8Format kE5M2{2, 15, true, 0x7b};

// The fp32 bits of the largest finite value (positive floats order as their bits).
constexpr uint32_t fp8_max_bits(const Fp8Format& f) {
  return (((f.max_code >> f.man_bits) + 127 - f.bias) << 23) |
         ((f.max_code & ((1u << f.man_bits) - 1)) << (23 - f.man_bits));
}

inline float fp8_to_float(uint8_t v, const Fp8Format& f) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t mant = v & ((1u << f.man_bits) - 1);
  const uint32_t exp = (v & 0x7fu) >> f.man_bits;
  const uint32_t exp_ones = 0x7fu >> f.man_bits;
  if (exp == exp_ones && (f.ieee_specials || mant == (1u << f.man_bits) - 1))
    return bits_float(sign | 0x7f800000u | (f.ieee_specials && mant == 0 ? 0u : 0x400000u));
  if (exp == 0) {  // subnormal: mant * 2^(1 - bias - man_bits), exact in fp32
    const float m = static_cast<float>(mant) / static_cast<float>(1u << (f.bias - 1 + f.man_bits));
    return bits_float(sign | float_bits(m));
  }
  return bits_float(sign | ((exp - f.bias + 127) << 23) | (mant << (23 - f.man_bits)));
}

// Rounds to nearest even. Magnitudes above the largest finite value, Inf included,
// saturate to it, as CUDA's __NV_SATFINITE conversion (which NCCL's fp8 reductions
// use) does: E4M3 has no Inf to overflow to, and a sum that overflows stays usable.
// NaN becomes 0x7f, its sign dropped, as CUDA's conversion does.
inline uint8_t float_to_fp8(float v, const Fp8Format& f) {
  const uint32_t x = float_bits(v);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fu;
  if (a >= fp8_max_bits(f)) return sign | f.max_code;
  if (a < 0x00800000u) return sign;  // zero, or an fp32 denormal: far below fp8's range
  const int e = static_cast<int>(a >> 23) - 127;
  const int emin = 1 - static_cast<int>(f.bias);
  uint32_t r, rem, shift;
  if (e >= emin) {  // normal
    shift = 23 - f.man_bits;
    r = (static_cast<uint32_t>(e + static_cast<int>(f.bias)) << f.man_bits) | ((a & 0x7fffffu) >> shift);
    rem = a & ((1u << shift) - 1);
  } else {  // subnormal: the significand with its leading 1, in units of 2^(emin - man_bits)
    shift = 23 - f.man_bits + static_cast<uint32_t>(emin - e);
    if (shift > 24) return sign;  // below half the smallest subnormal
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    r = m >> shift;
    rem = m & ((1u << shift) - 1);
  }
  const uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (r & 1u))) ++r;  // a carry bumps the exponent
  return static_cast<uint8_t>(sign | r);
}

}  // namespace weft::reduce
