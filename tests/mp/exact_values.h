// Exact test values shared by the multi-process checks, and the expectations,
// computed here independently of the library.
//
// At every element the ranks' inputs are small integers chosen so that
//
//   - every partial result, in any order and for up to kMaxRanks ranks, is exactly
//     representable in every datatype (int8 in [-128, 127], unsigned types
//     non-negative, bf16 integers of magnitude <= 256, half <= 2048);
//   - no two ranks contribute the same value (sum, avg, min, max, and the data of
//     broadcast, all-gather, all-to-all): a contribution lost, counted twice or taken
//     from the wrong rank changes the sum at every element;
//   - which rank holds the minimum, the maximum, or a factor of 2 (prod) changes
//     from element to element, driven by a hash of the element index, so a chunk
//     moved to the wrong place is seen too.
//
// The pattern repeats every kPeriod elements, so a large buffer is filled and
// checked from one precomputed period. kPeriod is prime: no power-of-two slice or
// offset is a multiple of it, so a piece moved by one lands on other values.
// inputs_have_the_properties() proves all of the above for any input function;
// `weft-check-allreduce --self-check` runs it (test mp-exact-values).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "numeric.h"
#include "weft/weft.h"

namespace weft_test {

// The datatypes these values cover: every one but fp8, which holds too few integers
// exactly (E5M2: to 8) for sums over 8 ranks; weft-perf -c 1 checks fp8 (its
// patterns shrink to the type's exact range).
inline constexpr int kNumTypes = 10;
inline const char* kTypeNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                            "half", "float", "double", "bfloat16"};
inline const char* kOpNames[] = {"sum", "prod", "max", "min", "avg"};
inline const size_t kTypeSize[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};

inline bool is_float(int t) { return t >= weftFloat16 && t <= weftBfloat16; }
inline bool is_unsigned(int t) { return t == weftUint8 || t == weftUint32 || t == weftUint64; }

inline constexpr int kMaxRanks = 8;
inline constexpr size_t kPeriod = 65521;  // the largest prime below 2^16

namespace detail {

inline uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The kMaxRanks inputs of one element for one family of ops.
struct Row {
  int8_t v[kMaxRanks];
};
enum Family { kSumFamily = 0, kMinMaxFamily = 1, kProdFamily = 2, kFamilies = 3 };

inline Row make_row(int family, size_t i) {
  const uint64_t h = mix64(static_cast<uint64_t>(i) * kFamilies + static_cast<uint64_t>(family));
  Row row{};
  if (family == kProdFamily) {
    // Factor 2 where bit r is set, negative where bit 8 + r is set. At most 6 factors
    // of 2 over all 8 ranks, so every partial product has magnitude <= 64 (int8).
    int twos = 0;
    for (int r = 0; r < kMaxRanks; ++r) {
      int mag = 1;
      if ((h >> r) & 1) mag = ++twos <= 6 ? 2 : 1;
      row.v[r] = static_cast<int8_t>(((h >> (8 + r)) & 1) ? -mag : mag);
    }
    return row;
  }
  // A permutation of 1..9 (Fisher-Yates on the low 32 bits; 9! < 2^32): rank r gets
  // entry r, the ninth value is left out, so even the sum of all 8 ranks' magnitudes
  // (45 - the one left out) varies by element. Bit 32 + r makes rank r's value negative.
  int8_t vals[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  uint64_t lo = h & 0xffffffffu;
  for (int k = 8; k > 0; --k) {
    const int j = static_cast<int>(lo % static_cast<uint64_t>(k + 1));
    lo /= static_cast<uint64_t>(k + 1);
    const int8_t t = vals[k];
    vals[k] = vals[j];
    vals[j] = t;
  }
  for (int r = 0; r < kMaxRanks; ++r)
    row.v[r] = static_cast<int8_t>(((h >> (32 + r)) & 1) ? -vals[r] : vals[r]);
  return row;
}

inline int family_of(int op) {
  switch (op) {
    case weftProd: return kProdFamily;
    case weftMax:
    case weftMin: return kMinMaxFamily;
    default: return kSumFamily;
  }
}

// One period of every family, built once per process (1.5 MB, a few ms).
inline const Row& row(int op, size_t i) {
  static const std::array<std::vector<Row>, kFamilies> tables = [] {
    std::array<std::vector<Row>, kFamilies> t;
    for (int f = 0; f < kFamilies; ++f) {
      t[static_cast<size_t>(f)].resize(kPeriod);
      for (size_t e = 0; e < kPeriod; ++e) t[static_cast<size_t>(f)][e] = make_row(f, e);
    }
    return t;
  }();
  return tables[static_cast<size_t>(family_of(op))][i % kPeriod];
}

}  // namespace detail

// Input of rank r (< kMaxRanks; the check programs refuse larger jobs) at element i,
// before the datatype's view.
inline int64_t input(int op, int r, size_t i) { return detail::row(op, i).v[r]; }

// Unsigned types get the magnitudes only (still distinct per rank, still 1 or 2 for
// prod), so every value and partial result is non-negative.
inline int64_t view(int type, int64_t v) { return is_unsigned(type) && v < 0 ? -v : v; }
inline int64_t input_for(int type, int op, int r, size_t i) { return view(type, input(op, r, i)); }

inline void store(void* buf, int type, size_t i, double v) {
  switch (type) {
    case weftInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(static_cast<int64_t>(v)); break;
    case weftUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
    case weftInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case weftUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(static_cast<int64_t>(v)); break;
    case weftInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case weftUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(static_cast<int64_t>(v)); break;
    case weftFloat16: static_cast<uint16_t*>(buf)[i] = float_to_half(static_cast<float>(v)); break;
    case weftFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case weftFloat64: static_cast<double*>(buf)[i] = v; break;
    case weftBfloat16: static_cast<uint16_t*>(buf)[i] = float_to_bf16(static_cast<float>(v)); break;
  }
}

// Combines n values (already in the datatype's view) with op, as exact integers;
// avg is left as the sum (the division depends on the datatype).
inline int64_t combine(int op, const int64_t* v, int n) {
  int64_t acc = v[0];
  for (int r = 1; r < n; ++r) {
    switch (op) {
      case weftProd: acc *= v[r]; break;
      case weftMax: acc = v[r] > acc ? v[r] : acc; break;
      case weftMin: acc = v[r] < acc ? v[r] : acc; break;
      default: acc += v[r];
    }
  }
  return acc;
}

// The result bytes of the datatype for the combined integer `acc` over n ranks.
inline void finish(int type, int op, int n, int64_t acc, void* out) {
  if (op != weftAvg) {
    store(out, type, 0, static_cast<double>(acc));
    return;
  }
  if (!is_float(type)) {
    // Integer avg: the sum wraps in the type first, then divides, truncating toward
    // zero (weft.h). The inputs keep every sum in range, so nothing wraps today.
    unsigned char tmp[8];
    store(tmp, type, 0, static_cast<double>(acc));
    int64_t wrapped;
    switch (type) {
      case weftInt8: wrapped = *reinterpret_cast<int8_t*>(tmp); break;
      case weftUint8: wrapped = *reinterpret_cast<uint8_t*>(tmp); break;
      case weftInt32: wrapped = *reinterpret_cast<int32_t*>(tmp); break;
      case weftUint32: wrapped = *reinterpret_cast<uint32_t*>(tmp); break;
      default: wrapped = acc;
    }
    if (type == weftUint64) {
      std::memcpy(out, tmp, 8);
      *static_cast<uint64_t*>(out) /= static_cast<uint64_t>(n);
      return;
    }
    store(out, type, 0, static_cast<double>(wrapped / n));  // C++ '/' truncates toward zero
    return;
  }
  // Floating avg: the exact sum divided once (fp16/bf16 through the fp32 quotient,
  // which rounds to the correctly rounded result, as the library documents).
  if (type == weftFloat64) store(out, type, 0, static_cast<double>(acc) / n);
  else store(out, type, 0, static_cast<double>(static_cast<float>(acc) / static_cast<float>(n)));
}

// The exact result for element i over ranks 0..n-1, as the bytes of the result type.
inline void expected(int type, int op, int n, size_t i, void* out) {
  const detail::Row& row = detail::row(op, i);
  int64_t v[kMaxRanks] = {};
  for (int r = 0; r < n; ++r) v[r] = view(type, row.v[r]);
  finish(type, op, n, combine(op, v, n), out);
}

// ---------------------------------------------------------------------------
// The self-check: proves, for any input function in(op, r, i) (raw values, before
// view()), the properties the checks rely on. Returns "" when they hold, else the
// first failure of each property that fails, one per line. Takes well under a
// second: `weft-check-allreduce --self-check` runs it as its own test (mp-exact-values)
// rather than every rank of every run. *stats (optional) gets the weakest margins.
//
//   1. Exactness: over one whole period (every element there is) and every datatype,
//      every partial result of any subset of the kMaxRanks ranks, in any order, lies
//      within the range where the type holds integers exactly: for sum, avg and the
//      pre-multiplied sum (weights 1 + r % 2, check_collectives) the partial sums lie
//      between the sum of the negative and the sum of the positive terms; for prod the
//      magnitude of any partial product is at most the product of all magnitudes.
//      Unsigned views are never negative.
//   2. Every rank distinct: at every element of the period the kMaxRanks values of the
//      sum family and of the min/max family are distinct and non-zero in both views
//      (signed, and the magnitudes unsigned types get).
//   3. Lost or doubled contributions: for n = 2..kMaxRanks and every ordered pair of
//      ranks (a, b), a != b, the result with rank a counted twice and rank b dropped
//      differs from the true one at >= 1/2 of the first 1000 elements for sum and avg
//      (avg in floating types: an integer avg can truncate a difference away), at
//      >= 1/2 (signed views) and >= 2/5 (unsigned views, whose factors are only 1 or
//      2) for prod, and for min and max at >= 1/(2n) of them (a doubled or missing
//      rank changes a min/max only where that rank is the extreme one, so every rank
//      must be the extreme one at its share of elements). Dropping or doubling a
//      single rank changes the sum and the float avg at >= 1/2 of them.
//   4. No short period: for n = 1..kMaxRanks the true sum at element i and at i + d
//      differ at >= 1/2 of the first 1000 elements for every shift d in 1..64 and
//      the power-of-two shifts up to 2^16.
template <class In>
std::string inputs_have_the_properties(In in, std::string* stats = nullptr) {
  char msg[256];
  constexpr int kTypes = 10;
  constexpr size_t kProbe = 1000;
  auto limit = [](int type) -> int64_t {  // the largest integer magnitude held exactly
    switch (type) {
      case weftInt8: return 127;  // and -128
      case weftUint8: return 255;
      case weftInt32: return INT32_MAX;
      case weftUint32: return UINT32_MAX;
      case weftFloat16: return 2048;
      case weftBfloat16: return 256;
      case weftFloat32: return int64_t{1} << 24;
      case weftFloat64: return int64_t{1} << 53;
      default: return INT64_MAX;
    }
  };
  auto exact = [&]() -> std::string {  // 1
    for (size_t i = 0; i < kPeriod; ++i) {
      for (int type = 0; type < kTypes; ++type) {
        const int64_t hi_lim = limit(type), lo_lim = is_unsigned(type) ? 0 : -hi_lim - (type == weftInt8);
        for (int op = 0; op < 5; ++op) {
          int64_t v[kMaxRanks] = {};
          int64_t lo = 0, hi = 0, wlo = 0, whi = 0, mag = 1;
          for (int r = 0; r < kMaxRanks; ++r) {
            v[r] = view(type, in(op, r, i));
            if (v[r] < lo_lim || v[r] > hi_lim) {
              std::snprintf(msg, sizeof msg, "element %zu: rank %d's %s input %lld does not fit %s", i, r,
                            kOpNames[op], static_cast<long long>(v[r]), kTypeNames[type]);
              return msg;
            }
            (v[r] < 0 ? lo : hi) += v[r];
            (v[r] < 0 ? wlo : whi) += (1 + r % 2) * v[r];
            mag *= v[r] < 0 ? -v[r] : v[r];
          }
          bool ok = true;
          if (op == weftProd) ok = mag <= hi_lim && mag != 0 && (lo_lim < 0 || mag >= 1);
          else if (op == weftSum || op == weftAvg) ok = lo >= lo_lim && hi <= hi_lim && wlo >= lo_lim && whi <= hi_lim;
          if (!ok) {
            std::snprintf(msg, sizeof msg, "element %zu: a partial %s over %d ranks can leave the exact range of %s",
                          i, kOpNames[op], kMaxRanks, kTypeNames[type]);
            return msg;
          }
        }
      }
    }
    return "";
  };
  auto distinct = [&]() -> std::string {  // 2
    for (size_t i = 0; i < kPeriod; ++i)
      for (int type : {static_cast<int>(weftInt64), static_cast<int>(weftUint64)})
        for (int op : {static_cast<int>(weftSum), static_cast<int>(weftMax)})
          for (int a = 0; a < kMaxRanks; ++a)
            for (int b = a; b < kMaxRanks; ++b) {
              const int64_t va = view(type, in(op, a, i)), vb = view(type, in(op, b, i));
              if (va == 0) {
                std::snprintf(msg, sizeof msg, "element %zu: rank %d's %s %s input is 0", i, a, kTypeNames[type],
                              kOpNames[op]);
                return msg;
              }
              if (a != b && va == vb) {
                std::snprintf(msg, sizeof msg, "element %zu: ranks %d and %d have the same %s %s input %lld", i, a,
                              b, kTypeNames[type], kOpNames[op], static_cast<long long>(va));
                return msg;
              }
            }
    return "";
  };
  // The result bytes (up to 8) over ranks 0..n-1, with rank `twice` counted twice
  // and rank `drop` left out (-1: none).
  auto result = [&](int type, int op, int n, size_t i, int twice, int drop) {
    int64_t v[kMaxRanks + 1] = {};
    int k = 0;
    for (int r = 0; r < n; ++r)
      if (r != drop) v[k++] = view(type, in(op, r, i));
    if (twice >= 0) v[k++] = view(type, in(op, twice, i));
    uint64_t out = 0;
    finish(type, op, n, combine(op, v, k), &out);
    return out;
  };
  size_t weakest[5] = {kProbe, kProbe, kProbe, kProbe, kProbe};  // per op, over pairs
  auto sensitive = [&]() -> std::string {  // 3
    // Part 1 makes every type hold the same exact integers, so int64 and uint64
    // stand for the signed and unsigned views; half and bf16 add the rounded avg.
    for (int op = 0; op < 5; ++op) {
      for (int n = 2; n <= kMaxRanks; ++n) {
        for (int type : {static_cast<int>(weftInt64), static_cast<int>(weftUint64), static_cast<int>(weftFloat16),
                         static_cast<int>(weftBfloat16)}) {
          if (op == weftAvg && !is_float(type)) continue;
          uint64_t truth[kProbe];
          for (size_t i = 0; i < kProbe; ++i) truth[i] = result(type, op, n, i, -1, -1);
          size_t need = kProbe / 2;
          if (op == weftProd && is_unsigned(type)) need = kProbe * 2 / 5;
          if (op == weftMin || op == weftMax) need = kProbe / (2 * static_cast<size_t>(n));
          for (int a = -1; a < n; ++a) {
            for (int b = -1; b < n; ++b) {
              if (a == b) continue;
              // Alone, a dropped or doubled rank is asked of the sum family only: a
              // factor 1 or an element where another rank is the extreme hides it.
              if ((a < 0 || b < 0) && op != weftSum && op != weftAvg) continue;
              size_t differ = 0;
              for (size_t i = 0; i < kProbe; ++i) differ += result(type, op, n, i, a, b) != truth[i];
              if (n == kMaxRanks && differ < weakest[op]) weakest[op] = differ;
              if (differ < need) {
                std::snprintf(msg, sizeof msg,
                              "%s %s over %d ranks: counting rank %d twice and dropping rank %d (-1: none) changes "
                              "only %zu of the first %zu results (need %zu)",
                              kTypeNames[type], kOpNames[op], n, a, b, differ, kProbe, need);
                return msg;
              }
            }
          }
        }
      }
    }
    return "";
  };
  size_t weakest_shift = kProbe;
  auto aperiodic = [&]() -> std::string {  // 4
    std::vector<size_t> shifts;
    for (size_t d = 1; d <= 64; ++d) shifts.push_back(d);
    for (size_t d = 128; d <= 65536; d *= 2) shifts.push_back(d);
    for (int n = 1; n <= kMaxRanks; ++n) {
      for (int type : {static_cast<int>(weftInt64), static_cast<int>(weftUint64)}) {
        for (size_t d : shifts) {
          size_t differ = 0;
          for (size_t i = 0; i < kProbe; ++i)
            differ += result(type, weftSum, n, i, -1, -1) != result(type, weftSum, n, i + d, -1, -1);
          if (differ < weakest_shift) weakest_shift = differ;
          if (differ < kProbe / 2) {
            std::snprintf(msg, sizeof msg,
                          "%s sum over %d ranks: elements i and i + %zu agree at %zu of the first %zu (a short "
                          "period)",
                          kTypeNames[type], n, d, kProbe - differ, kProbe);
            return msg;
          }
        }
      }
    }
    return "";
  };
  std::string why;
  for (const std::string& w : {exact(), distinct(), sensitive(), aperiodic()})
    if (!w.empty()) why += w + "\n";
  if (stats != nullptr) {
    std::snprintf(msg, sizeof msg,
                  "at %d ranks a doubled+dropped pair changes at least: sum %zu, prod %zu, max %zu, min %zu, "
                  "avg %zu of %zu results; a shift changes the sum at >= %zu of %zu",
                  kMaxRanks, weakest[weftSum], weakest[weftProd], weakest[weftMax], weakest[weftMin],
                  weakest[weftAvg], kProbe, weakest_shift, kProbe);
    *stats = msg;
  }
  return why;
}

// The self-check of this file's own inputs.
inline std::string self_check(std::string* stats = nullptr) {
  return inputs_have_the_properties([](int op, int r, size_t i) { return input(op, r, i); }, stats);
}

}  // namespace weft_test
