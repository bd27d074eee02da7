#include "train/layernorm.h"

#include <algorithm>
#include <cmath>

namespace weft::train {

template <class T>
void layernormForward(T* out, Acc<T>* mean, Acc<T>* rstd, const T* x, const T* w, const T* b,
                      int N, int C) {
  using A = Acc<T>;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const T* xr = x + size_t(n) * C;
    A m = 0;
#pragma omp simd reduction(+ : m)
    for (int i = 0; i < C; i++) m += ld(xr[i]);
    m /= A(C);
    A v = 0;
#pragma omp simd reduction(+ : v)
    for (int i = 0; i < C; i++) {
      A d = ld(xr[i]) - m;
      v += d * d;
    }
    v /= A(C);
    A s = A(1) / std::sqrt(v + A(kLayerNormEps));
    T* o = out + size_t(n) * C;
    for (int i = 0; i < C; i++) o[i] = st<T>((ld(xr[i]) - m) * s * ld(w[i]) + ld(b[i]));
    mean[n] = m;
    rstd[n] = s;
  }
}

template <class T>
void layernormBackward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w,
                       const Acc<T>* mean, const Acc<T>* rstd, int N, int C) {
  using A = Acc<T>;
  // Input gradient, row by row:
  //   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dout * w.
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const T* xr = x + size_t(n) * C;
    const T* dr = dout + size_t(n) * C;
    A m = mean[n], s = rstd[n];
    A gMean = 0, gxMean = 0;
#pragma omp simd reduction(+ : gMean, gxMean)
    for (int i = 0; i < C; i++) {
      A g = ld(dr[i]) * ld(w[i]);
      gMean += g;
      gxMean += g * (ld(xr[i]) - m) * s;
    }
    gMean /= A(C);
    gxMean /= A(C);
    T* dxr = dx + size_t(n) * C;
    for (int i = 0; i < C; i++) {
      A xhat = (ld(xr[i]) - m) * s;
      A g = ld(dr[i]) * ld(w[i]);
      dxr[i] = st<T>(ld(dxr[i]) + s * (g - gMean - xhat * gxMean));
    }
  }
  // Weight and bias gradients: column blocks in parallel, rows in a fixed order.
  constexpr int kBlock = 32;
  int nblocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int bI = 0; bI < nblocks; bI++) {
    int i0 = bI * kBlock, i1 = std::min(C, i0 + kBlock);
    A aw[kBlock] = {}, ab[kBlock] = {};
    for (int n = 0; n < N; n++) {
      const T* xr = x + size_t(n) * C;
      const T* dr = dout + size_t(n) * C;
      A m = mean[n], s = rstd[n];
      for (int i = i0; i < i1; i++) {
        A d = ld(dr[i]);
        aw[i - i0] += d * (ld(xr[i]) - m) * s;
        ab[i - i0] += d;
      }
    }
    for (int i = i0; i < i1; i++) {
      dw[i] = st<T>(ld(dw[i]) + aw[i - i0]);
      db[i] = st<T>(ld(db[i]) + ab[i - i0]);
    }
  }
}

#define WEFT_INST(T)                                                                         \
  template void layernormForward<T>(T*, Acc<T>*, Acc<T>*, const T*, const T*, const T*, int, \
                                    int);                                                    \
  template void layernormBackward<T>(T*, T*, T*, const T*, const T*, const T*,              \
                                     const Acc<T>*, const Acc<T>*, int, int);
WEFT_INST(float)
WEFT_INST(double)
WEFT_INST(bf16)
WEFT_INST(f16)
#undef WEFT_INST

}  // namespace weft::train
