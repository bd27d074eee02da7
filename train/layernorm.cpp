#include "train/layernorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace weft::train {

// Rows are widened into per-thread fp32 buffers (F16C for fp16) so the arithmetic
// loops vectorize; results are identical to element-wise conversion.
template <class T>
void layernormForward(T* out, Acc<T>* mean, Acc<T>* rstd, const T* x, const T* w, const T* b,
                      int N, int C) {
  using A = Acc<T>;
#pragma omp parallel
  {
    std::vector<A> xr(C), o(C), wv(C), bv(C);
    toAccSerial(w, wv.data(), size_t(C));
    toAccSerial(b, bv.data(), size_t(C));
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
      toAccSerial(x + size_t(n) * C, xr.data(), size_t(C));
      A m = 0;
#pragma omp simd reduction(+ : m)
      for (int i = 0; i < C; i++) m += xr[i];
      m /= A(C);
      A v = 0;
#pragma omp simd reduction(+ : v)
      for (int i = 0; i < C; i++) {
        A d = xr[i] - m;
        v += d * d;
      }
      v /= A(C);
      const A s = A(1) / std::sqrt(v + A(kLayerNormEps));
      for (int i = 0; i < C; i++) o[i] = (xr[i] - m) * s * wv[i] + bv[i];
      fromAccSerial(o.data(), out + size_t(n) * C, size_t(C));
      mean[n] = m;
      rstd[n] = s;
    }
  }
}

template <class T>
void layernormBackward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w,
                       const Acc<T>* mean, const Acc<T>* rstd, int N, int C) {
  using A = Acc<T>;
  // Input gradient, row by row:
  //   dx += rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dout * w.
#pragma omp parallel
  {
    std::vector<A> xr(C), dr(C), dxr(C), wv(C);
    toAccSerial(w, wv.data(), size_t(C));
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
      toAccSerial(x + size_t(n) * C, xr.data(), size_t(C));
      toAccSerial(dout + size_t(n) * C, dr.data(), size_t(C));
      toAccSerial(dx + size_t(n) * C, dxr.data(), size_t(C));
      const A m = mean[n], s = rstd[n];
      A gMean = 0, gxMean = 0;
#pragma omp simd reduction(+ : gMean, gxMean)
      for (int i = 0; i < C; i++) {
        const A g = dr[i] * wv[i];
        gMean += g;
        gxMean += g * (xr[i] - m) * s;
      }
      gMean /= A(C);
      gxMean /= A(C);
      for (int i = 0; i < C; i++) {
        const A xhat = (xr[i] - m) * s;
        dxr[i] += s * (dr[i] * wv[i] - gMean - xhat * gxMean);
      }
      fromAccSerial(dxr.data(), dx + size_t(n) * C, size_t(C));
    }
  }
  // Weight and bias gradients: column blocks in parallel, rows in a fixed order.
  constexpr int kBlock = 32;
  int nblocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int bI = 0; bI < nblocks; bI++) {
    const int i0 = bI * kBlock, len = std::min(C, i0 + kBlock) - i0;
    A aw[kBlock] = {}, ab[kBlock] = {}, xs[kBlock], ds[kBlock];
    for (int n = 0; n < N; n++) {
      toAccSerial(x + size_t(n) * C + i0, xs, size_t(len));
      toAccSerial(dout + size_t(n) * C + i0, ds, size_t(len));
      const A m = mean[n], s = rstd[n];
      for (int i = 0; i < len; i++) {
        aw[i] += ds[i] * (xs[i] - m) * s;
        ab[i] += ds[i];
      }
    }
    for (int i = 0; i < len; i++) {
      dw[i0 + i] = st<T>(ld(dw[i0 + i]) + aw[i]);
      db[i0 + i] = st<T>(ld(db[i0 + i]) + ab[i]);
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
