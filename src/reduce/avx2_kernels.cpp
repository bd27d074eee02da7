// The AVX2 kernel set: 256-bit registers, F16C for fp16, FMA-capable CPUs (Haswell,
// Zen 1 and later). Compiled for that instruction set by the pragma below, after
// every header, so only the functions of this file use it; reduce.cpp calls them only
// once supported() has said yes.
#include "reduce/kernel_set.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "reduce/dtype_visit.h"
#include "reduce/half.h"

namespace weft::reduce {
namespace {
bool avx2_supported() {
  __builtin_cpu_init();
  // libgcc reports avx2 only when the OS saves the YMM state (XCR0).
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
         __builtin_cpu_supports("fma");
}
}  // namespace
}  // namespace weft::reduce

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace weft::reduce {
namespace {

constexpr size_t kVecBytes = 32;
#include "reduce/simd_types.inc"

inline Vec<float> half_to_float(HalfBits h) { return (Vec<float>)_mm256_cvtph_ps((__m128i)h); }
inline HalfBits float_to_half(Vec<float> f) {
  return (HalfBits)_mm256_cvtps_ph((__m256)f, _MM_FROUND_TO_NEAREST_INT);
}
inline Vec<uint32_t> widen_u16(HalfBits h) { return (Vec<uint32_t>)_mm256_cvtepu16_epi32((__m128i)h); }
// Packs 8 lanes to 16 bits: packus works within 128-bit halves, the permute joins them.
inline HalfBits narrow_u32(Vec<uint32_t> r) {
  const __m256i p = _mm256_packus_epi32((__m256i)r, (__m256i)r);
  return (HalfBits)_mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0xd8));
}
// Bytes by hand: GCC 12 turns __builtin_convertvector between bytes and 32-bit lanes
// into one insert per lane (fp8 ran at a fifth of the speed).
inline Vec<uint32_t> widen_u8(QuarterBits b) {
  long long q;
  std::memcpy(&q, &b, sizeof q);
  return (Vec<uint32_t>)_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(q));
}
// Lanes < 256: packs to 16 then 8 bits (within 128-bit halves), then joins the low
// 4 bytes of each half.
inline QuarterBits narrow_u32_u8(Vec<uint32_t> r) {
  const __m256i p16 = _mm256_packus_epi32((__m256i)r, (__m256i)r);
  const __m256i p8 = _mm256_packus_epi16(p16, p16);
  const __m128i both = _mm_unpacklo_epi32(_mm256_castsi256_si128(p8), _mm256_extracti128_si256(p8, 1));
  const long long q = _mm_cvtsi128_si64(both);
  QuarterBits out;
  std::memcpy(&out, &q, sizeof out);
  return out;
}
inline void stream_store(void* p, VecN<long long, 16>::type v) {
  _mm_stream_si128(static_cast<__m128i*>(p), (__m128i)v);
}
inline void stream_store(void* p, VecN<long long, 32>::type v) {
  _mm256_stream_si256(static_cast<__m256i*>(p), (__m256i)v);
}

#include "reduce/simd_kernels.inc"

}  // namespace
}  // namespace weft::reduce

#pragma GCC pop_options

namespace weft::reduce {
const KernelSet& avx2_kernels() {
  static const KernelSet set{.name = "avx2",
                             .supported = avx2_supported,
                             .reduce = reduce_simd,
                             .divide = divide_simd,
                             .scale = scale_simd};
  return set;
}
}  // namespace weft::reduce

#else  // not x86: the set exists but is never supported

namespace weft::reduce {
namespace {
bool never() { return false; }
}  // namespace
const KernelSet& avx2_kernels() {
  static const KernelSet set{.name = "avx2",
                             .supported = never,
                             .reduce = scalar_kernels().reduce,
                             .divide = scalar_kernels().divide,
                             .scale = scalar_kernels().scale};
  return set;
}
}  // namespace weft::reduce

#endif
