// Test buffers and data for the reduction tests: guard bytes around every buffer,
// chosen misalignment, and values that include the awkward ones (NaN, +-Inf,
// denormals, -0.0, overflow-prone magnitudes, integer extremes).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "reference.h"
#include "reduce/reduce.h"

namespace weft::reduce::test {

inline constexpr weftDataType_t kAllDtypes[] = {weftInt8,  weftUint8,   weftInt32,  weftUint32,
                                                weftInt64, weftUint64,  weftFloat16, weftBfloat16,
                                                weftFloat32, weftFloat64, weftFloat8e4m3, weftFloat8e5m2};
inline constexpr Op kAllOps[] = {Op::Sum, Op::Prod, Op::Max, Op::Min};

inline const char* op_str(Op op) {
  switch (op) {
    case Op::Sum: return "sum";
    case Op::Prod: return "prod";
    case Op::Max: return "max";
    case Op::Min: return "min";
    case Op::Band: return "band";
    case Op::Bor: return "bor";
    case Op::Bxor: return "bxor";
  }
  return "?";
}

// Deterministic, platform-independent generator (splitmix64).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }

 private:
  uint64_t s_;
};

// count elements of dtype with `offset` bytes of misalignment from a 64-byte
// boundary and `kGuard` guard bytes (pattern 0xA5) on both sides.
class Buffer {
 public:
  static constexpr size_t kGuard = 64;
  Buffer(weftDataType_t dtype, size_t count, size_t offset)
      : bytes_(count * ref::elem_size(dtype)), store_(bytes_ + 2 * kGuard + 128, 0xA5) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(store_.data()) + kGuard;
    const uintptr_t aligned = (base + 63) & ~uintptr_t{63};
    data_ = store_.data() + (aligned - reinterpret_cast<uintptr_t>(store_.data())) + offset % 64;
  }
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // True if nothing outside [data, data + bytes) changed.
  bool guards_intact() const {
    const uint8_t* begin = store_.data();
    const uint8_t* end = store_.data() + store_.size();
    for (const uint8_t* p = begin; p < data_; ++p)
      if (*p != 0xA5) return false;
    for (const uint8_t* p = data_ + bytes_; p < end; ++p)
      if (*p != 0xA5) return false;
    return true;
  }

 private:
  size_t bytes_;
  std::vector<uint8_t> store_;
  uint8_t* data_;
};

inline double special_value(Rng& rng) {
  static const double kSpecial[] = {0.0,
                                    -0.0,
                                    std::numeric_limits<double>::infinity(),
                                    -std::numeric_limits<double>::infinity(),
                                    std::numeric_limits<double>::quiet_NaN(),
                                    -std::numeric_limits<double>::quiet_NaN(),
                                    1.0,
                                    -1.0,
                                    65504.0,  // fp16 max: sums overflow
                                    6.103515625e-05,  // fp16 min normal
                                    5.960464477539063e-08,  // fp16 min subnormal
                                    1.401298464324817e-45,  // fp32 min subnormal
                                    1.1754943508222875e-38,  // fp32 min normal
                                    3.4028234663852886e+38};  // fp32 max
  return kSpecial[rng.below(sizeof kSpecial / sizeof kSpecial[0])];
}

// One element's bytes.
inline void random_element(weftDataType_t dtype, Rng& rng, uint8_t* out) {
  const size_t es = ref::elem_size(dtype);
  const uint32_t pick = rng.below(16);
  if (!ref::is_float(dtype)) {
    uint64_t v = rng.next();
    if (pick == 0) v = 0;
    else if (pick == 1) v = ~uint64_t{0};  // -1 / max
    else if (pick == 2) v = uint64_t{1} << (8 * es - 1);  // INT_MIN of the width
    else if (pick < 8) v = rng.below(7);  // small: products stay interesting
    std::memcpy(out, &v, es);
    return;
  }
  double v;
  if (pick < 2) {
    v = special_value(rng);
  } else if (pick < 5) {  // any bit pattern: NaNs with payloads, denormals, huge, tiny
    uint64_t bits = rng.next();
    std::memcpy(out, &bits, es);
    return;
  } else if (pick < 7) {  // tiny values near the denormal ranges of the narrow types
    v = (rng.uniform() - 0.5) * std::ldexp(1.0, -14 - static_cast<int>(rng.below(120)));
  } else if (pick < 10) {  // small integers and halves: exact sums, rounding ties
    v = (static_cast<double>(rng.below(4097)) - 2048.0) / (1 + rng.below(2));
  } else {
    v = (rng.uniform() - 0.5) * 2000.0;
  }
  switch (dtype) {
    case weftFloat16: { uint16_t h = ref::round_to_half(v); std::memcpy(out, &h, 2); break; }
    case weftBfloat16: { uint16_t b = ref::round_to_bf16(v); std::memcpy(out, &b, 2); break; }
    case weftFloat8e4m3: *out = ref::round_to_e4m3(v); break;
    case weftFloat8e5m2: *out = ref::round_to_e5m2(v); break;
    case weftFloat32: { float f = static_cast<float>(v); std::memcpy(out, &f, 4); break; }
    default: std::memcpy(out, &v, 8); break;
  }
}

inline void fill_random(weftDataType_t dtype, Rng& rng, uint8_t* p, size_t count) {
  const size_t es = ref::elem_size(dtype);
  for (size_t i = 0; i < count; ++i) random_element(dtype, rng, p + i * es);
}

// Compares count elements; reports the first few mismatches.
inline ::testing::AssertionResult same_elements(weftDataType_t dtype, const uint8_t* got,
                                                const uint8_t* want, size_t count) {
  const size_t es = ref::elem_size(dtype);
  size_t bad = 0;
  std::string msg;
  for (size_t i = 0; i < count; ++i) {
    if (ref::same_element(dtype, got + i * es, want + i * es)) continue;
    if (++bad <= 4)
      msg += "\n  [" + std::to_string(i) + "] got " + ref::show(dtype, got + i * es) +
             " want " + ref::show(dtype, want + i * es);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << count << " elements differ (dtype "
                                       << dtype_name(dtype) << ")" << msg;
}

}  // namespace weft::reduce::test
