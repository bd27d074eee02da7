// The AVX-512 kernel set: 512-bit registers; F, BW (byte and word lanes), VL and DQ
// (64-bit multiplies), as on Skylake-SP, Ice Lake and Zen 4 and later. fp16 uses the
// 512-bit F16C-style conversions of AVX512F (no AVX512_FP16 arithmetic: we accumulate
// in fp32 anyway). Compiled for that instruction set by the pragma below, after every
// header, so only this file's functions use it; reduce.cpp calls them only once
// supported() has said yes.
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
bool avx512_supported() {
  __builtin_cpu_init();
  // libgcc reports avx512* only when the OS saves the ZMM and mask state (XCR0).
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
         __builtin_cpu_supports("fma");
}
}  // namespace
}  // namespace weft::reduce

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")

namespace weft::reduce {
namespace {

constexpr size_t kVecBytes = 64;
#include "reduce/simd_types.inc"

// The zero-masking forms: GCC 12's plain _mm512_cvtph_ps/_mm512_cvtps_ph start from
// a self-initialized "undefined" register that trips -Wmaybe-uninitialized. With an
// all-ones mask they are the same instruction.
inline Vec<float> half_to_float(HalfBits h) {
  return (Vec<float>)_mm512_maskz_cvtph_ps(__mmask16(0xffff), (__m256i)h);
}
inline HalfBits float_to_half(Vec<float> f) {
  return (HalfBits)_mm512_maskz_cvtps_ph(__mmask16(0xffff), (__m512)f,
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
// Explicit vpmovzx/vpmov: GCC 12 splits __builtin_convertvector at 512 bits into
// 256-bit halves and shuffles.
inline Vec<uint32_t> widen_u16(HalfBits h) {
  return (Vec<uint32_t>)_mm512_maskz_cvtepu16_epi32(__mmask16(0xffff), (__m256i)h);
}
inline HalfBits narrow_u32(Vec<uint32_t> r) {
  return (HalfBits)_mm512_maskz_cvtepi32_epi16(__mmask16(0xffff), (__m512i)r);
}
inline Vec<uint32_t> widen_u8(QuarterBits b) {
  return (Vec<uint32_t>)_mm512_maskz_cvtepu8_epi32(__mmask16(0xffff), (__m128i)b);
}
inline QuarterBits narrow_u32_u8(Vec<uint32_t> r) {
  return (QuarterBits)_mm512_maskz_cvtepi32_epi8(__mmask16(0xffff), (__m512i)r);
}
inline void stream_store(void* p, VecN<long long, 32>::type v) {
  _mm256_stream_si256(static_cast<__m256i*>(p), (__m256i)v);
}
inline void stream_store(void* p, VecN<long long, 64>::type v) {
  _mm512_stream_si512(static_cast<__m512i*>(p), (__m512i)v);
}

#include "reduce/simd_kernels.inc"

}  // namespace
}  // namespace weft::reduce

#pragma GCC pop_options

namespace weft::reduce {
const KernelSet& avx512_kernels() {
  static const KernelSet set{.name = "avx512",
                             .supported = avx512_supported,
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
const KernelSet& avx512_kernels() {
  static const KernelSet set{.name = "avx512",
                             .supported = never,
                             .reduce = scalar_kernels().reduce,
                             .divide = scalar_kernels().divide,
                             .scale = scalar_kernels().scale};
  return set;
}
}  // namespace weft::reduce

#endif
