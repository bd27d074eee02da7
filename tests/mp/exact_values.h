// Exact test values shared by the multi-process checks: small integers, so every
// sum, product, min, max and average over up to 8 ranks is exactly representable
// in every datatype (bf16 included), and the expectation is computed here,
// independently of the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "numeric.h"
#include "weft/weft.h"

namespace weft_test {

inline const char* kTypeNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                            "half", "float", "double", "bfloat16"};
inline const char* kOpNames[] = {"sum", "prod", "max", "min", "avg"};
inline const size_t kTypeSize[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};

inline bool is_float(int t) { return t >= weftFloat16 && t <= weftBfloat16; }

// Input of rank r at element i: small integers, so sums over 8 ranks stay exact
// even in bf16 (8 significant bits) and products stay within 2^8.
inline int64_t input(int op, int r, size_t i) {
  switch (op) {
    case weftProd: return 1 + static_cast<int64_t>((i + static_cast<size_t>(r)) % 3 == 0);  // 1 or 2
    case weftMax:
    case weftMin: return static_cast<int64_t>((i * 7 + static_cast<size_t>(r) * 13) % 23) - 11;
    default: return static_cast<int64_t>((i + static_cast<size_t>(r) * 3) % 9) - 4 + (r % 2);
  }
}

// Unsigned types get the magnitudes only, so min/max/sum stay meaningful.
inline int64_t input_for(int type, int op, int r, size_t i) {
  int64_t v = input(op, r, i);
  if (type == weftUint8 || type == weftUint32 || type == weftUint64) v = v < 0 ? -v : v;
  return v;
}

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

// The exact result for element i, as the bytes of the result type.
inline void expected(int type, int op, int n, size_t i, void* out) {
  int64_t acc = input_for(type, op, 0, i);
  for (int r = 1; r < n; ++r) {
    int64_t v = input_for(type, op, r, i);
    switch (op) {
      case weftProd: acc *= v; break;
      case weftMax: acc = v > acc ? v : acc; break;
      case weftMin: acc = v < acc ? v : acc; break;
      default: acc += v;
    }
  }
  if (op != weftAvg) {
    store(out, type, 0, static_cast<double>(acc));
    return;
  }
  if (!is_float(type)) {
    // Integer avg: the sum wraps in the type first, then divides (truncating).
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
    store(out, type, 0, static_cast<double>(wrapped / n));
    return;
  }
  if (type == weftFloat64) store(out, type, 0, static_cast<double>(acc) / n);
  else store(out, type, 0, static_cast<double>(static_cast<float>(acc) / static_cast<float>(n)));
}


}  // namespace weft_test
