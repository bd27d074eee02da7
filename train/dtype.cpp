#include "train/dtype.h"

#include <immintrin.h>

#include <algorithm>

namespace weft::train {

const char* dtypeName(DType d) {
  switch (d) {
    case DType::f32: return "fp32";
    case DType::bf16: return "bf16";
    case DType::f16: return "fp16";
    case DType::f64: return "fp64";
  }
  return "?";
}

bool parseDType(std::string_view s, DType* out) {
  if (s == "fp32" || s == "f32" || s == "float32") { *out = DType::f32; return true; }
  if (s == "bf16" || s == "bfloat16") { *out = DType::bf16; return true; }
  if (s == "fp16" || s == "f16" || s == "float16") { *out = DType::f16; return true; }
  if (s == "fp64" || s == "f64" || s == "float64") { *out = DType::f64; return true; }
  return false;
}

size_t dtypeSize(DType d) {
  switch (d) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::f64: return 8;
  }
  return 0;
}

template <class T> void toAcc(const T* src, Acc<T>* dst, size_t n) {
  long long nn = (long long)n;
#pragma omp parallel for schedule(static) if (nn > 65536)
  for (long long i = 0; i < nn; i++) dst[i] = ld(src[i]);  // vectorizes for bf16
}

template <class T> void fromAcc(const Acc<T>* src, T* dst, size_t n) {
  long long nn = (long long)n;
#pragma omp parallel for schedule(static) if (nn > 65536)
  for (long long i = 0; i < nn; i++) dst[i] = st<T>(src[i]);
}

// fp16 bulk conversions use F16C when the CPU has it (same IEEE round-to-nearest-even
// results as the scalar toF16/toFloat, chosen at run time so the build stays generic).
namespace {

__attribute__((target("avx,f16c"))) void halfToFloatF16C(const f16* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; i++) dst[i] = toFloat(src[i]);
}

__attribute__((target("avx,f16c"))) void floatToHalfF16C(const float* src, f16* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; i++) dst[i] = toF16(src[i]);
}

const bool kHaveF16C = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");

}  // namespace

void f16ToFloatSerial(const f16* src, float* dst, size_t n) {
  if (kHaveF16C) return halfToFloatF16C(src, dst, n);
  for (size_t i = 0; i < n; i++) dst[i] = toFloat(src[i]);
}

void floatToF16Serial(const float* src, f16* dst, size_t n) {
  if (kHaveF16C) return floatToHalfF16C(src, dst, n);
  for (size_t i = 0; i < n; i++) dst[i] = toF16(src[i]);
}

template <> void toAcc<f16>(const f16* src, float* dst, size_t n) {
  const long long blocks = (long long)((n + 65535) / 65536);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (long long b = 0; b < blocks; b++) {
    const size_t i0 = size_t(b) * 65536, len = std::min<size_t>(65536, n - i0);
    f16ToFloatSerial(src + i0, dst + i0, len);
  }
}

template <> void fromAcc<f16>(const float* src, f16* dst, size_t n) {
  const long long blocks = (long long)((n + 65535) / 65536);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (long long b = 0; b < blocks; b++) {
    const size_t i0 = size_t(b) * 65536, len = std::min<size_t>(65536, n - i0);
    floatToF16Serial(src + i0, dst + i0, len);
  }
}

#define WEFT_INST(T)                                    \
  template void toAcc<T>(const T*, Acc<T>*, size_t);    \
  template void fromAcc<T>(const Acc<T>*, T*, size_t);
WEFT_INST(float)
WEFT_INST(double)
WEFT_INST(bf16)
#undef WEFT_INST

}  // namespace weft::train
