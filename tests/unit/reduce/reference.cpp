#include "reference.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

namespace weft::reduce::ref {
namespace {

// Value of a non-negative code of a binary format with `mant_bits` stored mantissa
// bits and exponent bias `bias`; the all-ones exponent with mantissa 0 (Inf) is given
// the value 2^(emax+1), the next binade's start, which is exactly what rounding
// toward Inf has to compare against.
double code_value(uint32_t code, int mant_bits, int bias) {
  const uint32_t mant = code & ((1u << mant_bits) - 1);
  const int exp = static_cast<int>(code >> mant_bits);
  if (exp == 0) return std::ldexp(static_cast<double>(mant), 1 - bias - mant_bits);
  return std::ldexp(static_cast<double>(mant + (1u << mant_bits)), exp - bias - mant_bits);
}

struct Format {
  int mant_bits, bias;
  uint32_t inf_code;  // positive Inf
  std::vector<double> values;  // values[c] for c in [0, inf_code]
  Format(int m, int b, uint32_t inf) : mant_bits(m), bias(b), inf_code(inf) {
    for (uint32_t c = 0; c <= inf_code; ++c) values.push_back(code_value(c, m, b));
  }
  uint16_t round(double x) const {
    const uint16_t sign = std::signbit(x) ? static_cast<uint16_t>(1u << 15) : 0;
    if (std::isnan(x)) return static_cast<uint16_t>(inf_code | (1u << (mant_bits - 1)));
    const double a = std::fabs(x);
    // Largest code whose value is <= a.
    uint32_t lo = 0, hi = inf_code;
    if (a >= values[inf_code]) return static_cast<uint16_t>(sign | inf_code);
    while (hi - lo > 1) {
      const uint32_t mid = (lo + hi) / 2;
      if (values[mid] <= a) lo = mid;
      else hi = mid;
    }
    // values[lo] <= a < values[lo + 1]; both neighbours and their midpoint are exact
    // in double for these narrow formats.
    const double down = a - values[lo], up = values[lo + 1] - a;
    uint32_t c = lo;
    if (up < down || (up == down && (lo & 1u))) c = lo + 1;
    return static_cast<uint16_t>(sign | c);
  }
  float decode(uint16_t code) const {
    const bool neg = (code >> 15) != 0;
    const uint32_t c = code & 0x7fffu;
    double v;
    if (c > inf_code) v = std::nan("");
    else if (c == inf_code) v = INFINITY;
    else v = values[c];
    return static_cast<float>(neg ? -v : v);
  }
};

const Format& half_format() {
  static const Format f(10, 15, 0x7c00);
  return f;
}
const Format& bf16_format() {
  static const Format f(7, 127, 0x7f80);
  return f;
}

// fp8 (OCP E4M3 / E5M2): the same table search, but the codes above the largest
// finite one are NaN (E5M2: the first of them Inf), and rounding saturates there:
// anything at or beyond the largest finite magnitude, Inf too, becomes it.
struct Fp8Format {
  int mant_bits, bias;
  uint32_t max_code;     // largest finite magnitude
  uint32_t inf_code;     // 0: no Inf
  std::vector<double> values;  // values[c] for c in [0, max_code]
  Fp8Format(int m, int b, uint32_t max, uint32_t inf) : mant_bits(m), bias(b), max_code(max), inf_code(inf) {
    for (uint32_t c = 0; c <= max_code; ++c) values.push_back(code_value(c, m, b));
  }
  uint8_t round(double x) const {
    if (std::isnan(x)) return 0x7f;
    const uint8_t sign = std::signbit(x) ? 0x80 : 0;
    const double a = std::fabs(x);
    if (a >= values[max_code]) return static_cast<uint8_t>(sign | max_code);
    uint32_t lo = 0;
    while (values[lo + 1] <= a) ++lo;  // 127 codes at most: a scan is plain enough
    const double down = a - values[lo], up = values[lo + 1] - a;
    uint32_t c = lo;
    if (up < down || (up == down && (lo & 1u))) c = lo + 1;
    return static_cast<uint8_t>(sign | c);
  }
  float decode(uint8_t code) const {
    const bool neg = (code & 0x80) != 0;
    const uint32_t c = code & 0x7fu;
    double v;
    if (c <= max_code) v = values[c];
    else if (c == inf_code) v = INFINITY;
    else v = std::nan("");
    return static_cast<float>(neg ? -v : v);
  }
};

const Fp8Format& e4m3_format() {
  static const Fp8Format f(3, 7, 0x7e, 0);
  return f;
}
const Fp8Format& e5m2_format() {
  static const Fp8Format f(2, 15, 0x7b, 0x7c);
  return f;
}

template <class T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

template <class F>
F fmin_ref(F a, F b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a < b) return a;
  if (b < a) return b;
  return std::signbit(a) ? a : b;  // equal: only the sign of zero may differ
}
template <class F>
F fmax_ref(F a, F b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a > b) return a;
  if (b > a) return b;
  return std::signbit(a) ? b : a;
}

template <class F>
F fcombine(Op op, F a, F b) {
  switch (op) {
    case Op::Sum: return a + b;
    case Op::Prod: return a * b;
    case Op::Max: return fmax_ref(a, b);
    case Op::Min: return fmin_ref(a, b);
    case Op::Band:
    case Op::Bor:
    case Op::Bxor: break;  // integers only: the kernels refuse floats
  }
  return a;
}

// Integers: all arithmetic in 64 bits, truncated to the width at the end, which is
// arithmetic modulo 2^width; comparisons on the sign- or zero-extended values.
struct Int {
  size_t bytes;
  bool is_signed;
  uint64_t load(const uint8_t* p) const {
    uint64_t v = 0;
    std::memcpy(&v, p, bytes);  // little-endian
    if (is_signed && bytes < 8 && (v >> (8 * bytes - 1)) & 1u) v |= ~uint64_t{0} << (8 * bytes);
    return v;
  }
  void store(uint8_t* p, uint64_t v) const { std::memcpy(p, &v, bytes); }
  bool less(uint64_t a, uint64_t b) const {
    return is_signed ? static_cast<int64_t>(a) < static_cast<int64_t>(b) : a < b;
  }
  uint64_t combine(Op op, uint64_t a, uint64_t b) const {
    switch (op) {
      case Op::Sum: return a + b;
      case Op::Prod: return a * b;
      case Op::Max: return less(a, b) ? b : a;
      case Op::Min: return less(b, a) ? b : a;
      case Op::Band: return a & b;
      case Op::Bor: return a | b;
      case Op::Bxor: return a ^ b;
    }
    return a;
  }
};

Int int_of(weftDataType_t dtype) {
  switch (dtype) {
    case weftInt8: return {1, true};
    case weftUint8: return {1, false};
    case weftInt32: return {4, true};
    case weftUint32: return {4, false};
    case weftInt64: return {8, true};
    default: return {8, false};
  }
}

// Widen an fp8/fp16/bf16/fp32 element to float.
float load_f(weftDataType_t dtype, const uint8_t* p) {
  if (dtype == weftFloat8e4m3) return e4m3_format().decode(*p);
  if (dtype == weftFloat8e5m2) return e5m2_format().decode(*p);
  if (dtype == weftFloat16) return half_to_float(get<uint16_t>(p));
  if (dtype == weftBfloat16) return bf16_to_float(get<uint16_t>(p));
  return get<float>(p);
}
void store_narrow(weftDataType_t dtype, uint8_t* p, double v) {
  if (dtype == weftFloat8e4m3) *p = e4m3_format().round(v);
  else if (dtype == weftFloat8e5m2) *p = e5m2_format().round(v);
  else if (dtype == weftFloat16) put(p, round_to_half(v));
  else if (dtype == weftBfloat16) put(p, round_to_bf16(v));
  else put(p, static_cast<float>(v));  // double -> float rounds to nearest even
}

}  // namespace

float half_to_float(uint16_t h) { return half_format().decode(h); }
float bf16_to_float(uint16_t b) { return bf16_format().decode(b); }
uint16_t round_to_half(double x) { return half_format().round(x); }
uint16_t round_to_bf16(double x) { return bf16_format().round(x); }
float e4m3_to_float(uint8_t v) { return e4m3_format().decode(v); }
float e5m2_to_float(uint8_t v) { return e5m2_format().decode(v); }
uint8_t round_to_e4m3(double x) { return e4m3_format().round(x); }
uint8_t round_to_e5m2(double x) { return e5m2_format().round(x); }

size_t elem_size(weftDataType_t dtype) {
  switch (dtype) {
    case weftInt8: case weftUint8: case weftFloat8e4m3: case weftFloat8e5m2: return 1;
    case weftFloat16: case weftBfloat16: return 2;
    case weftInt32: case weftUint32: case weftFloat32: return 4;
    default: return 8;
  }
}

bool is_float(weftDataType_t dtype) {
  return dtype == weftFloat16 || dtype == weftBfloat16 || dtype == weftFloat32 ||
         dtype == weftFloat64 || dtype == weftFloat8e4m3 || dtype == weftFloat8e5m2;
}

std::vector<uint8_t> reduce(weftDataType_t dtype, Op op, const std::vector<const uint8_t*>& srcs,
                            size_t count) {
  const size_t es = elem_size(dtype);
  std::vector<uint8_t> out(count * es);
  if (srcs.size() == 1) {  // no op applied: the bits as they are (an fp8 Inf stays Inf)
    if (count > 0) std::memcpy(out.data(), srcs[0], count * es);
    return out;
  }
  for (size_t i = 0; i < count; ++i) {
    const size_t off = i * es;
    if (dtype == weftFloat64) {
      double acc = get<double>(srcs[0] + off);
      for (size_t s = 1; s < srcs.size(); ++s) acc = fcombine(op, acc, get<double>(srcs[s] + off));
      put(out.data() + off, acc);
    } else if (is_float(dtype)) {
      // fp8/fp16/bf16/fp32: accumulate in fp32 left to right, round once at the end.
      float acc = load_f(dtype, srcs[0] + off);
      for (size_t s = 1; s < srcs.size(); ++s) acc = fcombine(op, acc, load_f(dtype, srcs[s] + off));
      store_narrow(dtype, out.data() + off, acc);
    } else {
      const Int t = int_of(dtype);
      uint64_t acc = t.load(srcs[0] + off);
      for (size_t s = 1; s < srcs.size(); ++s) acc = t.combine(op, acc, t.load(srcs[s] + off));
      t.store(out.data() + off, acc);
    }
  }
  return out;
}

std::vector<uint8_t> divide(weftDataType_t dtype, const uint8_t* src, size_t count,
                            int64_t divisor) {
  const size_t es = elem_size(dtype);
  std::vector<uint8_t> out(count * es);
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* p = src + i * es;
    uint8_t* q = out.data() + i * es;
    if (dtype == weftFloat64) {
      put(q, get<double>(p) / static_cast<double>(divisor));
    } else if (is_float(dtype)) {
      // The exact quotient rounded once to the dtype: double division is exact enough
      // (53 >= 2*24 + 2) that rounding its result again is still correct rounding.
      store_narrow(dtype, q, static_cast<double>(load_f(dtype, p)) / static_cast<double>(divisor));
    } else {
      const Int t = int_of(dtype);
      const uint64_t v = t.load(p);
      uint64_t r;
      if (t.is_signed) r = static_cast<uint64_t>(static_cast<int64_t>(v) / divisor);  // truncates
      else r = v / static_cast<uint64_t>(divisor);
      t.store(q, r);
    }
  }
  return out;
}

std::vector<uint8_t> scale(weftDataType_t dtype, const uint8_t* src, size_t count,
                           const uint8_t* scalar) {
  const size_t es = elem_size(dtype);
  std::vector<uint8_t> out(count * es);
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* p = src + i * es;
    uint8_t* q = out.data() + i * es;
    if (dtype == weftFloat64) {
      put(q, get<double>(p) * get<double>(scalar));
    } else if (is_float(dtype)) {
      // Products of two floats are exact in double; round that once.
      store_narrow(dtype, q,
                   static_cast<double>(load_f(dtype, p)) * static_cast<double>(load_f(dtype, scalar)));
    } else {
      const Int t = int_of(dtype);
      t.store(q, t.load(p) * t.load(scalar));
    }
  }
  return out;
}

bool same_element(weftDataType_t dtype, const uint8_t* a, const uint8_t* b) {
  const size_t es = elem_size(dtype);
  if (std::memcmp(a, b, es) == 0) return true;
  if (!is_float(dtype)) return false;
  if (dtype == weftFloat64) return std::isnan(get<double>(a)) && std::isnan(get<double>(b));
  return std::isnan(load_f(dtype, a)) && std::isnan(load_f(dtype, b));
}

std::string show(weftDataType_t dtype, const uint8_t* p) {
  char buf[96];
  const size_t es = elem_size(dtype);
  uint64_t bits = 0;
  std::memcpy(&bits, p, es);
  double v;
  if (dtype == weftFloat64) v = get<double>(p);
  else if (is_float(dtype)) v = load_f(dtype, p);
  else v = static_cast<double>(int_of(dtype).is_signed ? static_cast<double>(static_cast<int64_t>(int_of(dtype).load(p)))
                                                        : static_cast<double>(int_of(dtype).load(p)));
  std::snprintf(buf, sizeof buf, "0x%llx (%.17g)", static_cast<unsigned long long>(bits), v);
  return buf;
}

}  // namespace weft::reduce::ref
