// Storage types of the training layer and their conversions.
//
// Tensors are stored in one of fp32, bf16, fp16 (and fp64 for gradient checks).
// Arithmetic always happens in the accumulation type Acc<T>: fp32 for the three
// training types, fp64 for fp64. Loads widen (ld), stores round to nearest even (st).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace weft::train {

enum class DType { f32, bf16, f16, f64 };

const char* dtypeName(DType d);             // "fp32", "bf16", "fp16", "fp64"
bool parseDType(std::string_view s, DType* out);
size_t dtypeSize(DType d);

struct bf16 { uint16_t bits; };
struct f16 { uint16_t bits; };

inline float bitsToFloat(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t floatToBits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float toFloat(bf16 h) { return bitsToFloat(uint32_t(h.bits) << 16); }

inline bf16 toBf16(float f) {
  // Branch-free so that bulk conversions vectorize: round to nearest even, NaN kept quiet.
  const uint32_t u = floatToBits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  return bf16{uint16_t((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded)};
}

inline float toFloat(f16 h) {
  uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  uint32_t e = (h.bits >> 10) & 0x1fu;
  uint32_t m = h.bits & 0x3ffu;
  if (e == 0) {  // zero or subnormal: m * 2^-24
    float v = float(m) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (e == 31) return bitsToFloat(sign | 0x7f800000u | (m << 13));
  return bitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

inline f16 toF16(float f) {
  uint32_t x = floatToBits(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return f16{uint16_t(sign | 0x7e00u)};    // NaN
  if (ax >= 0x477ff000u) return f16{uint16_t(sign | 0x7c00u)};   // >= 65520 rounds to inf
  if (ax < 0x38800000u) {  // below 2^-14: subnormal half (unit 2^-24) or zero
    float q = bitsToFloat(ax) * 16777216.0f;  // exact scaling
    return f16{uint16_t(sign | uint32_t(std::nearbyint(q)))};
  }
  uint32_t h = ((((ax >> 23) - 112u)) << 10) | ((ax & 0x7fffffu) >> 13);
  uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;  // carry may bump the exponent: correct
  return f16{uint16_t(sign | h)};
}

// Accumulation type of a storage type.
template <class T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };
template <class T> using Acc = typename AccOf<T>::type;

inline float ld(float v) { return v; }
inline double ld(double v) { return v; }
inline float ld(bf16 v) { return toFloat(v); }
inline float ld(f16 v) { return toFloat(v); }

template <class T> inline T st(Acc<T> v);
template <> inline float st<float>(float v) { return v; }
template <> inline double st<double>(double v) { return v; }
template <> inline bf16 st<bf16>(float v) { return toBf16(v); }
template <> inline f16 st<f16>(float v) { return toF16(v); }

template <class T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::f32; }
template <> constexpr DType dtypeOf<double>() { return DType::f64; }
template <> constexpr DType dtypeOf<bf16>() { return DType::bf16; }
template <> constexpr DType dtypeOf<f16>() { return DType::f16; }

// Serial bulk conversions (for use inside parallel regions); fp16 uses F16C when the
// CPU has it, with results identical to the scalar functions.
void f16ToFloatSerial(const f16* src, float* dst, size_t n);
void floatToF16Serial(const float* src, f16* dst, size_t n);
inline void toAccSerial(const float* s, float* d, size_t n) { std::memcpy(d, s, n * 4); }
inline void toAccSerial(const double* s, double* d, size_t n) { std::memcpy(d, s, n * 8); }
inline void toAccSerial(const bf16* s, float* d, size_t n) { for (size_t i = 0; i < n; i++) d[i] = toFloat(s[i]); }
inline void toAccSerial(const f16* s, float* d, size_t n) { f16ToFloatSerial(s, d, n); }
inline void fromAccSerial(const float* s, float* d, size_t n) { std::memcpy(d, s, n * 4); }
inline void fromAccSerial(const double* s, double* d, size_t n) { std::memcpy(d, s, n * 8); }
inline void fromAccSerial(const float* s, bf16* d, size_t n) { for (size_t i = 0; i < n; i++) d[i] = toBf16(s[i]); }
inline void fromAccSerial(const float* s, f16* d, size_t n) { floatToF16Serial(s, d, n); }

// Bulk conversions (OpenMP-parallel for large n).
template <class T> void toAcc(const T* src, Acc<T>* dst, size_t n);
template <class T> void fromAcc(const Acc<T>* src, T* dst, size_t n);
template <> void toAcc<f16>(const f16* src, float* dst, size_t n);     // F16C when present
template <> void fromAcc<f16>(const float* src, f16* dst, size_t n);

}  // namespace weft::train
