#include "datatype.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>

namespace weftperf {
namespace {

constexpr int64_t kCap = int64_t{1} << 62;

const TypeInfo kTypes[] = {
    {weftInt8, "int8", 1, false, 127, 6},
    {weftUint8, "uint8", 1, false, 255, 7},
    {weftInt32, "int32", 4, false, (int64_t{1} << 31) - 1, 30},
    {weftUint32, "uint32", 4, false, (int64_t{1} << 32) - 1, 31},
    {weftInt64, "int64", 8, false, kCap, 62},
    {weftUint64, "uint64", 8, false, kCap, 62},
    {weftFloat16, "half", 2, true, 2048, 15},        // 11-bit significand
    {weftFloat32, "float", 4, true, int64_t{1} << 24, 62},
    {weftFloat64, "double", 8, true, int64_t{1} << 53, 62},
    {weftBfloat16, "bfloat16", 2, true, 256, 62},    // 8-bit significand
    {weftFloat8e4m3, "f8e4m3", 1, true, 16, 8},      // 4-bit significand, largest 448
    {weftFloat8e5m2, "f8e5m2", 1, true, 8, 15},      // 3-bit significand, largest 57344
};

struct Alias {
  const char* name;
  weftDataType_t type;
};
const Alias kTypeAliases[] = {
    {"int8", weftInt8},       {"char", weftInt8},         {"uint8", weftUint8},
    {"int32", weftInt32},     {"int", weftInt32},         {"uint32", weftUint32},
    {"int64", weftInt64},     {"uint64", weftUint64},     {"half", weftFloat16},
    {"fp16", weftFloat16},    {"float16", weftFloat16},   {"float", weftFloat32},
    {"fp32", weftFloat32},    {"float32", weftFloat32},   {"double", weftFloat64},
    {"fp64", weftFloat64},    {"float64", weftFloat64},   {"bfloat16", weftBfloat16},
    {"bf16", weftBfloat16},   {"f8e4m3", weftFloat8e4m3}, {"float8_e4m3fn", weftFloat8e4m3},
    {"f8e5m2", weftFloat8e5m2}, {"float8_e5m2", weftFloat8e5m2},
};

// The ops weft-perf measures, numbered as weftRedOp_t: nccl-tests' five. The
// bitwise ones are left out: they hold only for integer types, and -o all runs
// every op on every type of -d.
const char* const kOpNames[] = {"sum", "prod", "max", "min", "avg"};
constexpr int kNumOps = static_cast<int>(std::size(kOpNames));

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

}  // namespace

const TypeInfo& Info(weftDataType_t type) {
  for (const TypeInfo& t : kTypes)
    if (t.type == type) return t;
  return kTypes[7];  // unreachable for the types ParseTypes produces
}

bool ParseTypes(const std::string& text, std::vector<weftDataType_t>* out) {
  out->clear();
  if (text == "all") {
    // nccl-tests' order for -d all.
    for (weftDataType_t t : {weftInt8, weftUint8, weftInt32, weftUint32, weftInt64, weftUint64,
                             weftFloat16, weftFloat32, weftFloat64, weftBfloat16, weftFloat8e4m3,
                             weftFloat8e5m2})
      out->push_back(t);
    return true;
  }
  for (const Alias& a : kTypeAliases) {
    if (text == a.name) {
      out->push_back(a.type);
      return true;
    }
  }
  return false;
}

bool ParseOps(const std::string& text, std::vector<weftRedOp_t>* out) {
  out->clear();
  for (int op = 0; op < kNumOps; ++op)
    if (text == "all" || text == kOpNames[op]) out->push_back(static_cast<weftRedOp_t>(op));
  return !out->empty();
}

const char* OpName(weftRedOp_t op) {
  return op >= 0 && op < kNumOps ? kOpNames[op] : "?";
}

uint16_t FloatToHalf(float f) {
  uint32_t x = FloatBits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x > 0x7f800000) return sign | 0x7e00;   // NaN
  if (x >= 0x47800000) return sign | 0x7c00;  // >= 65536: infinity (65520..65536 rounds below)
  if (x < 0x38800000) {
    // Below 2^-14: a half subnormal, in units of 2^-24. Scaling by 2^24 is exact
    // and nearbyint rounds to nearest even in the default rounding mode.
    float scaled = std::fabs(f) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  uint32_t h = ((((x >> 23) - 127 + 15) << 10) | ((x & 0x7fffff) >> 13));
  uint32_t rest = x & 0x1fff;
  // A carry out of the mantissa bumps the exponent, which is the right answer.
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return sign | static_cast<uint16_t>(h);
}

uint16_t FloatToBf16(float f) {
  uint32_t x = FloatBits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

uint8_t DoubleToFp8(double v, int man_bits, int bias, double largest, uint8_t largest_code) {
  if (std::isnan(v)) return 0x7f;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const double a = std::fabs(v);
  if (a == 0) return sign;
  // Rounded to the spacing of a's binade (of the subnormals below the normal
  // range); nearbyint rounds to nearest even in the default rounding mode.
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  const int binade = std::max(e - 1, 1 - bias);
  const double r = std::nearbyint(std::ldexp(a, man_bits - binade)) * std::ldexp(1.0, binade - man_bits);
  if (r >= largest) return sign | largest_code;
  if (r < std::ldexp(1.0, 1 - bias))  // subnormal: a multiple of the smallest one
    return sign | static_cast<uint8_t>(std::lround(std::ldexp(r, bias - 1 + man_bits)));
  std::frexp(r, &e);
  const int mant = static_cast<int>(std::lround(std::ldexp(r, man_bits - (e - 1)))) - (1 << man_bits);
  return sign | static_cast<uint8_t>(((e - 1 + bias) << man_bits) | mant);
}

uint64_t EncodeReal(weftDataType_t type, double value) {
  switch (type) {
    case weftFloat8e4m3:
      return DoubleToFp8(value, 3, 7, 448.0, 0x7e);
    case weftFloat8e5m2:
      return DoubleToFp8(value, 2, 15, 57344.0, 0x7b);
    case weftFloat16:
      return FloatToHalf(static_cast<float>(value));
    case weftBfloat16:
      return FloatToBf16(static_cast<float>(value));
    case weftFloat32:
      return FloatBits(static_cast<float>(value));
    case weftFloat64: {
      uint64_t u;
      std::memcpy(&u, &value, sizeof(u));
      return u;
    }
    default:
      return EncodeInt(type, static_cast<int64_t>(value));
  }
}

uint64_t EncodeInt(weftDataType_t type, int64_t value) {
  if (Info(type).is_float) return EncodeReal(type, static_cast<double>(value));
  uint64_t raw = static_cast<uint64_t>(value);
  size_t bits = Info(type).size * 8;
  return bits == 64 ? raw : raw & ((uint64_t{1} << bits) - 1);
}

uint64_t LoadRaw(const void* buf, size_t index, size_t size) {
  uint64_t raw = 0;
  std::memcpy(&raw, static_cast<const char*>(buf) + index * size, size);  // little-endian host
  return raw;
}

void StoreRaw(void* buf, size_t index, size_t size, uint64_t raw) {
  std::memcpy(static_cast<char*>(buf) + index * size, &raw, size);
}

}  // namespace weftperf
