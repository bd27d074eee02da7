// Host-side knowledge of weft's datatypes and reduction ops: names as nccl-tests
// prints them, sizes, and exact encoding of the values weft-perf checks with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace weftperf {

struct TypeInfo {
  weftDataType_t type;
  const char* name;  // nccl-tests' spelling
  size_t size;
  bool is_float;
  // Largest M such that every integer in [0, M] is exactly representable (and in
  // range): what sums may reach. Capped at 2^62 so host arithmetic fits in int64.
  int64_t max_exact;
  // Largest k such that 2^k is exactly representable: what products may reach.
  int max_pow2;
};

const TypeInfo& Info(weftDataType_t type);
// Parses a -d value: a name, an alias (fp16, bf16, fp32, ...) or "all".
bool ParseTypes(const std::string& text, std::vector<weftDataType_t>* out);
bool ParseOps(const std::string& text, std::vector<weftRedOp_t>* out);
const char* OpName(weftRedOp_t op);

// Raw element bits (little-endian, zero-extended) of `value` in `type`; exact for
// integers in [0, max_exact]. For floats other values are rounded to nearest even.
uint64_t EncodeInt(weftDataType_t type, int64_t value);
uint64_t EncodeReal(weftDataType_t type, double value);

uint64_t LoadRaw(const void* buf, size_t index, size_t size);
void StoreRaw(void* buf, size_t index, size_t size, uint64_t raw);

// IEEE binary16 and bfloat16 from float, round to nearest even.
uint16_t FloatToHalf(float f);
uint16_t FloatToBf16(float f);
// OCP fp8 (E4M3: 3 mantissa bits, bias 7, largest 448 = 0x7e; E5M2: 2, 15, 57344 =
// 0x7b) from double, round to nearest even, saturating at the largest finite value.
uint8_t DoubleToFp8(double v, int man_bits, int bias, double largest, uint8_t largest_code);

}  // namespace weftperf
