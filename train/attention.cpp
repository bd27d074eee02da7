#include "train/attention.h"

#include <cmath>
#include <vector>

namespace weft::train {

namespace {

// Widen one head's [T, hs] slice at column offset `col` of a [T, stride] matrix.
template <class T>
void loadHead(Acc<T>* dst, const T* src, int Tn, int stride, int col, int hs) {
  for (int t = 0; t < Tn; t++) {
    const T* s = src + size_t(t) * stride + col;
    for (int d = 0; d < hs; d++) dst[size_t(t) * hs + d] = ld(s[d]);
  }
}

}  // namespace

template <class T>
void attentionForward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH) {
  using A = Acc<T>;
  const int hs = C / NH;
  const A scale = A(1) / std::sqrt(A(hs));
#pragma omp parallel for schedule(dynamic, 1)
  for (int bh = 0; bh < B * NH; bh++) {
    const int b = bh / NH, h = bh % NH;
    const T* base = qkv + size_t(b) * Tn * 3 * C;
    std::vector<A> q(size_t(Tn) * hs), k(size_t(Tn) * hs), v(size_t(Tn) * hs), p(Tn), o(hs);
    loadHead(q.data(), base, Tn, 3 * C, h * hs, hs);
    loadHead(k.data(), base, Tn, 3 * C, C + h * hs, hs);
    loadHead(v.data(), base, Tn, 3 * C, 2 * C + h * hs, hs);
    T* attRows = att + size_t(bh) * Tn * Tn;
    for (int t = 0; t < Tn; t++) {
      const A* qt = &q[size_t(t) * hs];
      A mx = -INFINITY;
      for (int t2 = 0; t2 <= t; t2++) {
        const A* kt = &k[size_t(t2) * hs];
        A s = 0;
        for (int d = 0; d < hs; d++) s += qt[d] * kt[d];
        s *= scale;
        p[t2] = s;
        if (s > mx) mx = s;
      }
      A sum = 0;
      for (int t2 = 0; t2 <= t; t2++) {
        p[t2] = std::exp(p[t2] - mx);
        sum += p[t2];
      }
      const A inv = A(1) / sum;
      for (int d = 0; d < hs; d++) o[d] = 0;
      T* arow = attRows + size_t(t) * Tn;
      for (int t2 = 0; t2 <= t; t2++) {
        p[t2] *= inv;
        arow[t2] = st<T>(p[t2]);
        const A* vt = &v[size_t(t2) * hs];
        for (int d = 0; d < hs; d++) o[d] += p[t2] * vt[d];
      }
      for (int t2 = t + 1; t2 < Tn; t2++) arow[t2] = st<T>(A(0));
      T* orow = out + (size_t(b) * Tn + t) * C + h * hs;
      for (int d = 0; d < hs; d++) orow[d] = st<T>(o[d]);
    }
  }
}

template <class T>
void attentionBackward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int C,
                       int NH) {
  using A = Acc<T>;
  const int hs = C / NH;
  const A scale = A(1) / std::sqrt(A(hs));
#pragma omp parallel for schedule(dynamic, 1)
  for (int bh = 0; bh < B * NH; bh++) {
    const int b = bh / NH, h = bh % NH;
    const T* base = qkv + size_t(b) * Tn * 3 * C;
    const size_t n = size_t(Tn) * hs;
    std::vector<A> q(n), k(n), v(n), dO(n), dq(n, A(0)), dk(n, A(0)), dv(n, A(0)), p(Tn), dp(Tn);
    loadHead(q.data(), base, Tn, 3 * C, h * hs, hs);
    loadHead(k.data(), base, Tn, 3 * C, C + h * hs, hs);
    loadHead(v.data(), base, Tn, 3 * C, 2 * C + h * hs, hs);
    loadHead(dO.data(), dout + size_t(b) * Tn * C, Tn, C, h * hs, hs);
    const T* attRows = att + size_t(bh) * Tn * Tn;
    for (int t = 0; t < Tn; t++) {
      const A* dot = &dO[size_t(t) * hs];
      const T* arow = attRows + size_t(t) * Tn;
      // out_t = sum_t2 p[t2] v[t2]  ->  dv[t2] += p dO_t,  dp[t2] = dO_t . v[t2]
      A pdp = 0;
      for (int t2 = 0; t2 <= t; t2++) {
        p[t2] = ld(arow[t2]);
        const A* vt = &v[size_t(t2) * hs];
        A* dvt = &dv[size_t(t2) * hs];
        A s = 0;
        for (int d = 0; d < hs; d++) {
          s += dot[d] * vt[d];
          dvt[d] += p[t2] * dot[d];
        }
        dp[t2] = s;
        pdp += p[t2] * s;
      }
      // softmax backward: ds = p (dp - sum p dp); s = scale q.k
      const A* qt = &q[size_t(t) * hs];
      A* dqt = &dq[size_t(t) * hs];
      for (int t2 = 0; t2 <= t; t2++) {
        const A ds = p[t2] * (dp[t2] - pdp) * scale;
        const A* kt = &k[size_t(t2) * hs];
        A* dkt = &dk[size_t(t2) * hs];
        for (int d = 0; d < hs; d++) {
          dqt[d] += ds * kt[d];
          dkt[d] += ds * qt[d];
        }
      }
    }
    T* dbase = dqkv + size_t(b) * Tn * 3 * C;
    for (int t = 0; t < Tn; t++) {
      T* r = dbase + size_t(t) * 3 * C;
      for (int d = 0; d < hs; d++) {
        r[h * hs + d] = st<T>(dq[size_t(t) * hs + d]);
        r[C + h * hs + d] = st<T>(dk[size_t(t) * hs + d]);
        r[2 * C + h * hs + d] = st<T>(dv[size_t(t) * hs + d]);
      }
    }
  }
}

#define WEFT_INST(T)                                                                  \
  template void attentionForward<T>(T*, T*, const T*, int, int, int, int);            \
  template void attentionBackward<T>(T*, const T*, const T*, const T*, int, int, int, int);
WEFT_INST(float)
WEFT_INST(double)
WEFT_INST(bf16)
WEFT_INST(f16)
#undef WEFT_INST

}  // namespace weft::train
