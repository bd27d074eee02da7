// Test-side numerics, written independently of src/reduce: fp16/bf16
// conversions (round to nearest even) and exact expectations for small-integer
// inputs, so that multi-process checks compare against values computed here.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace weft_test {

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  uint32_t rounding = 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>((u + rounding) >> 16);
}
inline float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Exact for the values used here (normal numbers, integers and simple fractions);
// rounds to nearest even through the float's mantissa bits.
inline uint16_t float_to_half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  if (std::isnan(f)) return 0x7e00;
  float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7c00;
  if (a < 6.103515625e-05f) {  // subnormal half: multiple of 2^-24
    float q = std::nearbyint(a * 16777216.0f);
    return sign | static_cast<uint16_t>(q);
  }
  int exp;
  float m = std::frexp(a, &exp);  // a = m * 2^exp, m in [0.5, 1)
  float q = std::nearbyint(m * 2048.0f);  // 11 significant bits
  if (q == 2048.0f) q = 1024.0f, ++exp;
  uint16_t e = static_cast<uint16_t>(exp - 1 + 15);
  return sign | static_cast<uint16_t>(e << 10) | static_cast<uint16_t>(static_cast<uint32_t>(q) - 1024);
}
inline float half_to_float(uint16_t h) {
  int e = (h >> 10) & 0x1f;
  int m = h & 0x3ff;
  float v;
  if (e == 0) v = std::ldexp(static_cast<float>(m), -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(m + 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

}  // namespace weft_test
