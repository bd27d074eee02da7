// The scalar kernel set: one element at a time, no instruction-set assumptions
// beyond the compiler's baseline. It is the fallback on any CPU and the readable
// statement of the semantics the SIMD sets must match bit for bit.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "reduce/dtype_visit.h"
#include "reduce/half.h"
#include "reduce/kernel_set.h"

namespace weft::reduce {
namespace {

template <class T>
struct Plain {
  using S = T;  // storage
  using C = T;  // accumulation
  static C load(const char* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(char* p, C v) { std::memcpy(p, &v, sizeof v); }
};

struct Half {
  using S = uint16_t;
  using C = float;
  static C load(const char* p) { return half_to_float(Plain<uint16_t>::load(p)); }
  static void store(char* p, C v) { Plain<uint16_t>::store(p, float_to_half(v)); }
};

struct Bf16 {
  using S = uint16_t;
  using C = float;
  static C load(const char* p) { return bf16_to_float(Plain<uint16_t>::load(p)); }
  static void store(char* p, C v) { Plain<uint16_t>::store(p, float_to_bf16(v)); }
};

template <const Fp8Format& kFormat>
struct Fp8 {
  using S = uint8_t;
  using C = float;
  static C load(const char* p) { return fp8_to_float(static_cast<uint8_t>(*p), kFormat); }
  static void store(char* p, C v) { *p = static_cast<char>(float_to_fp8(v, kFormat)); }
};
using E4M3 = Fp8<kE4M3>;
using E5M2 = Fp8<kE5M2>;

// Min/Max of floats: NaN wins; -0 < +0 (see reduce.h).
template <class F>
F float_min(F a, F b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

template <class F>
F float_max(F a, F b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

template <Op O, class C>
C combine(C a, C b) {
  // Integer Sum/Prod arrive here as unsigned types (dtype_visit.h); the casts undo
  // the promotion of narrow types to int, which is well defined for unsigned.
  if constexpr (O == Op::Sum) return static_cast<C>(a + b);
  if constexpr (O == Op::Prod) return static_cast<C>(a * b);
  if constexpr (O == Op::Band) return static_cast<C>(a & b);
  if constexpr (O == Op::Bor) return static_cast<C>(a | b);
  if constexpr (O == Op::Bxor) return static_cast<C>(a ^ b);
  if constexpr (std::is_floating_point_v<C>) {
    if constexpr (O == Op::Min) return float_min(a, b);
    else return float_max(a, b);
  } else {
    if constexpr (O == Op::Min) return a < b ? a : b;
    else return a > b ? a : b;
  }
}

void reduce_scalar(void* dst, void* dst2, const void* const* srcs, int nsrcs, size_t count,
                   weftDataType_t dtype, Op op, bool /*nontemporal*/) {
  visit::dtype_op<Plain, Half, Bf16, E4M3, E5M2>(dtype, op, [&]<class E, Op O>() {
    constexpr size_t kSize = sizeof(typename E::S);
    const char* src[kMaxSources];
    for (int s = 0; s < nsrcs; ++s) src[s] = static_cast<const char*>(srcs[s]);
    char* d = static_cast<char*>(dst);
    char* d2 = static_cast<char*>(dst2);
    for (size_t i = 0; i < count; ++i) {
      const size_t off = i * kSize;
      // Every source element is read before dst is written: dst may alias a source.
      typename E::C acc = E::load(src[0] + off);
      for (int s = 1; s < nsrcs; ++s) acc = combine<O>(acc, E::load(src[s] + off));
      E::store(d + off, acc);
      if (d2 != nullptr) E::store(d2 + off, acc);
    }
  });
}

void scale_scalar(void* dst, const void* src, size_t count, weftDataType_t dtype,
                  const void* scalar) {
  visit::dtype_op<Plain, Half, Bf16, E4M3, E5M2>(dtype, Op::Prod, [&]<class E, Op O>() {
    constexpr size_t kSize = sizeof(typename E::S);
    const typename E::C k = E::load(static_cast<const char*>(scalar));
    const char* s = static_cast<const char*>(src);
    char* d = static_cast<char*>(dst);
    for (size_t i = 0; i < count; ++i)
      E::store(d + i * kSize, combine<O>(E::load(s + i * kSize), k));
  });
}

template <class T>
void divide_int(char* d, const char* s, size_t count, int64_t divisor) {
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, s + i * sizeof(T), sizeof v);
    T q;
    if (divisor == 0) {
      q = 0;
    } else if constexpr (std::is_signed_v<T>) {
      // In int64: the only overflowing case, INT64_MIN / -1, wraps to INT64_MIN.
      const int64_t w = static_cast<int64_t>(v);
      q = (divisor == -1) ? static_cast<T>(0 - static_cast<uint64_t>(w))
                          : static_cast<T>(w / divisor);
    } else {
      // A negative divisor for an unsigned type has no sensible meaning; divide by
      // its magnitude rather than by a huge unsigned value.
      const uint64_t m = divisor < 0 ? 0 - static_cast<uint64_t>(divisor)
                                     : static_cast<uint64_t>(divisor);
      q = static_cast<T>(static_cast<uint64_t>(v) / m);
    }
    std::memcpy(d + i * sizeof(T), &q, sizeof q);
  }
}

template <class E, class D>
void divide_float(char* d, const char* s, size_t count, D divisor) {
  constexpr size_t kSize = sizeof(typename E::S);
  for (size_t i = 0; i < count; ++i) E::store(d + i * kSize, E::load(s + i * kSize) / divisor);
}

void divide_scalar(void* dst, const void* src, size_t count, weftDataType_t dtype,
                   int64_t divisor) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  switch (dtype) {
    case weftInt8: return divide_int<int8_t>(d, s, count, divisor);
    case weftUint8: return divide_int<uint8_t>(d, s, count, divisor);
    case weftInt32: return divide_int<int32_t>(d, s, count, divisor);
    case weftUint32: return divide_int<uint32_t>(d, s, count, divisor);
    case weftInt64: return divide_int<int64_t>(d, s, count, divisor);
    case weftUint64: return divide_int<uint64_t>(d, s, count, divisor);
    // fp16/bf16/fp8 divide in fp32: the fp32 quotient rounded again to 11, 8 or 4 bits is
    // the correctly rounded quotient (24 >= 2*11+2), so this is "rounded once".
    case weftFloat16: return divide_float<Half>(d, s, count, static_cast<float>(divisor));
    case weftBfloat16: return divide_float<Bf16>(d, s, count, static_cast<float>(divisor));
    case weftFloat8e4m3: return divide_float<E4M3>(d, s, count, static_cast<float>(divisor));
    case weftFloat8e5m2: return divide_float<E5M2>(d, s, count, static_cast<float>(divisor));
    case weftFloat32: return divide_float<Plain<float>>(d, s, count, static_cast<float>(divisor));
    case weftFloat64: return divide_float<Plain<double>>(d, s, count, static_cast<double>(divisor));
    default: return;
  }
}

bool always() { return true; }

}  // namespace

const KernelSet& scalar_kernels() {
  static const KernelSet set{.name = "scalar",
                             .supported = always,
                             .reduce = reduce_scalar,
                             .divide = divide_scalar,
                             .scale = scale_scalar};
  return set;
}

}  // namespace weft::reduce
