// An independent reference for the reduction kernels: written without looking at the
// library's conversion code, and as plainly as possible. fp8/fp16/bf16 narrowing picks
// the nearest representable value from a table of all of them (ties to the even
// code), so it shares no bit tricks with src/reduce/half.h or the SIMD paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "reduce/reduce.h"

namespace weft::reduce::ref {

float half_to_float(uint16_t h);
float bf16_to_float(uint16_t b);
// Round x (any double) to nearest, ties to even; NaN gives some quiet NaN.
uint16_t round_to_half(double x);
uint16_t round_to_bf16(double x);
// fp8: NaN gives 0x7f; magnitudes at or beyond the largest finite one saturate to it.
float e4m3_to_float(uint8_t v);
float e5m2_to_float(uint8_t v);
uint8_t round_to_e4m3(double x);
uint8_t round_to_e5m2(double x);

size_t elem_size(weftDataType_t dtype);
bool is_float(weftDataType_t dtype);

// Byte vectors of count elements of dtype.
std::vector<uint8_t> reduce(weftDataType_t dtype, Op op, const std::vector<const uint8_t*>& srcs,
                            size_t count);
std::vector<uint8_t> divide(weftDataType_t dtype, const uint8_t* src, size_t count,
                            int64_t divisor);
std::vector<uint8_t> scale(weftDataType_t dtype, const uint8_t* src, size_t count,
                           const uint8_t* scalar);

// True if the elements are bit-identical, or both NaN (payloads are unspecified).
bool same_element(weftDataType_t dtype, const uint8_t* a, const uint8_t* b);

// Human-readable element, for failure messages.
std::string show(weftDataType_t dtype, const uint8_t* p);

}  // namespace weft::reduce::ref
