#include "train/mlp.h"

#include <algorithm>
#include <cmath>

#include "train/fastmath.h"

namespace weft::train {

namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;
}  // namespace

// Element kernels, written on widened values so that the fp32 loop vectorizes.
template <class A> inline A geluValue(A v) {
  const A u = A(kSqrt2OverPi) * (v + A(kCubic) * v * v * v);
  return A(0.5) * v * (A(1) + tanhFast(u));
}

template <class A> inline A geluGrad(A v) {
  const A u = A(kSqrt2OverPi) * (v + A(kCubic) * v * v * v);
  const A th = tanhFast(u);
  const A du = A(kSqrt2OverPi) * (A(1) + A(3 * kCubic) * v * v);
  return A(0.5) * (A(1) + th) + A(0.5) * v * (A(1) - th * th) * du;
}

constexpr long long kChunk = 2048;

// The fp32 loops, compiled for AVX-512 and AVX2 beside the baseline and picked at
// load time by the CPU (the build targets plain x86-64).
__attribute__((target_clones("avx512f", "avx2", "default")))
void geluChunk(float* buf, long long len) {
#pragma omp simd
  for (long long i = 0; i < len; i++) buf[i] = geluValue(buf[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default")))
void geluGradChunk(float* buf, const float* d, long long len) {
#pragma omp simd
  for (long long i = 0; i < len; i++) buf[i] = geluGrad(buf[i]) * d[i];
}

inline void geluChunk(double* buf, long long len) {
  for (long long i = 0; i < len; i++) buf[i] = geluValue(buf[i]);
}

inline void geluGradChunk(double* buf, const double* d, long long len) {
  for (long long i = 0; i < len; i++) buf[i] = geluGrad(buf[i]) * d[i];
}

template <class T> void geluForward(T* out, const T* x, size_t n) {
  using A = Acc<T>;
  const long long nn = (long long)n, chunks = (nn + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 8)
  for (long long c = 0; c < chunks; c++) {
    const long long i0 = c * kChunk, len = std::min(kChunk, nn - i0);
    A buf[kChunk];
    toAccSerial(x + i0, buf, size_t(len));
    geluChunk(buf, len);
    fromAccSerial(buf, out + i0, size_t(len));
  }
}

template <class T> void geluBackward(T* dx, const T* x, const T* dout, size_t n) {
  using A = Acc<T>;
  const long long nn = (long long)n, chunks = (nn + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 8)
  for (long long c = 0; c < chunks; c++) {
    const long long i0 = c * kChunk, len = std::min(kChunk, nn - i0);
    A buf[kChunk], d[kChunk];
    toAccSerial(x + i0, buf, size_t(len));
    toAccSerial(dout + i0, d, size_t(len));
    geluGradChunk(buf, d, len);
    fromAccSerial(buf, dx + i0, size_t(len));
  }
}

#define WEFT_INST(T)                                           \
  template void geluForward<T>(T*, const T*, size_t);          \
  template void geluBackward<T>(T*, const T*, const T*, size_t);
WEFT_INST(float)
WEFT_INST(double)
WEFT_INST(bf16)
WEFT_INST(f16)
#undef WEFT_INST

}  // namespace weft::train
