// Per (batch, head), as small GEMMs on one thread each (OpenMP across heads):
//   S = Q K^T / sqrt(hs), P = causal softmax(S), O = P V
// and backward
//   dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(P * dP)) / sqrt(hs),
//   dQ = dS K, dK = dS^T Q.
// The full T x T products are computed and the upper triangle masked: twice the
// causal flops, but BLAS speed beats triangular scalar loops by far.
#include "train/attention.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "train/fastmath.h"
#include "train/matmul.h"

namespace weft::train {

namespace {

// A head's [T, hs] slice of a [T, stride] matrix, as a pointer + leading dimension:
// a view for fp32/fp64 storage, a widened copy for bf16/fp16.
template <class T>
struct HeadView {
  using A = Acc<T>;
  std::vector<A> buf;
  const A* ptr = nullptr;
  int ld = 0;
  HeadView(const T* src, int Tn, int stride, int col, int hs) {
    if constexpr (std::is_same_v<T, A>) {
      ptr = src + col;
      ld = stride;
    } else {
      buf.resize(size_t(Tn) * hs);
      for (int t = 0; t < Tn; t++) toAccSerial(src + size_t(t) * stride + col, buf.data() + size_t(t) * hs, size_t(hs));
      ptr = buf.data();
      ld = hs;
    }
  }
};

// Softmax of row[0..t] in place, zeros after it. The fp32 version is compiled for
// AVX-512 and AVX2 beside the baseline and picked by the CPU at load time.
template <class A>
inline void causalSoftmaxRowImpl(A* row, int t, int Tn) {
  A mx = row[0];
  for (int t2 = 1; t2 <= t; t2++) mx = row[t2] > mx ? row[t2] : mx;
  A sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int t2 = 0; t2 <= t; t2++) {
    row[t2] = expFast(row[t2] - mx);
    sum += row[t2];
  }
  const A inv = A(1) / sum;
  for (int t2 = 0; t2 <= t; t2++) row[t2] *= inv;
  for (int t2 = t + 1; t2 < Tn; t2++) row[t2] = A(0);
}

__attribute__((target_clones("avx512f", "avx2", "default")))
void causalSoftmaxRow(float* row, int t, int Tn) { causalSoftmaxRowImpl(row, t, Tn); }
void causalSoftmaxRow(double* row, int t, int Tn) { causalSoftmaxRowImpl(row, t, Tn); }

// Store a [T, hs] result (leading dimension hs) into a [T, stride] matrix at column col.
template <class T>
void storeHead(T* dst, const Acc<T>* src, int Tn, int stride, int col, int hs) {
  for (int t = 0; t < Tn; t++) fromAccSerial(src + size_t(t) * hs, dst + size_t(t) * stride + col, size_t(hs));
}

}  // namespace

template <class T>
void attentionForward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH,
                      const Dropout& drop) {
  using A = Acc<T>;
  const int hs = C / NH;
  const A scale = A(1) / std::sqrt(A(hs));
#pragma omp parallel for schedule(dynamic, 1)
  for (int bh = 0; bh < B * NH; bh++) {
    const int b = bh / NH, h = bh % NH;
    const T* base = qkv + size_t(b) * Tn * 3 * C;
    HeadView<T> q(base, Tn, 3 * C, h * hs, hs), k(base, Tn, 3 * C, C + h * hs, hs),
        v(base, Tn, 3 * C, 2 * C + h * hs, hs);
    std::vector<A> p(size_t(Tn) * Tn), o(size_t(Tn) * hs);
    gemmSerial(false, true, Tn, Tn, hs, scale, q.ptr, q.ld, k.ptr, k.ld, A(0), p.data(), Tn);
    T* attRows = att + size_t(bh) * Tn * Tn;
    for (int t = 0; t < Tn; t++) {
      A* row = p.data() + size_t(t) * Tn;
      causalSoftmaxRow(row, t, Tn);
      if constexpr (std::is_same_v<T, A>) {
        std::copy(row, row + Tn, attRows + size_t(t) * Tn);
      } else {
        fromAccSerial(row, attRows + size_t(t) * Tn, size_t(Tn));
      }
      if (drop.active()) {
        const A keepScale = A(1.0 / (1.0 - drop.p));
        const uint64_t base = (uint64_t(bh) * Tn + t) * Tn;
        for (int t2 = 0; t2 <= t; t2++) row[t2] = drop.keep(base + t2) ? row[t2] * keepScale : A(0);
      }
    }
    T* obase = out + size_t(b) * Tn * C;
    if constexpr (std::is_same_v<T, A>) {
      gemmSerial(false, false, Tn, hs, Tn, A(1), p.data(), Tn, v.ptr, v.ld, A(0), obase + h * hs, C);
    } else {
      gemmSerial(false, false, Tn, hs, Tn, A(1), p.data(), Tn, v.ptr, v.ld, A(0), o.data(), hs);
      storeHead(obase, o.data(), Tn, C, h * hs, hs);
    }
  }
}

template <class T>
void attentionBackward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int C,
                       int NH, const Dropout& drop) {
  using A = Acc<T>;
  const int hs = C / NH;
  const A scale = A(1) / std::sqrt(A(hs));
#pragma omp parallel for schedule(dynamic, 1)
  for (int bh = 0; bh < B * NH; bh++) {
    const int b = bh / NH, h = bh % NH;
    const T* base = qkv + size_t(b) * Tn * 3 * C;
    HeadView<T> q(base, Tn, 3 * C, h * hs, hs), k(base, Tn, 3 * C, C + h * hs, hs),
        v(base, Tn, 3 * C, 2 * C + h * hs, hs), dO(dout + size_t(b) * Tn * C, Tn, C, h * hs, hs),
        P(att + size_t(bh) * Tn * Tn, Tn, Tn, 0, Tn);
    std::vector<A> ds(size_t(Tn) * Tn), pdrop;
    T* dbase = dqkv + size_t(b) * Tn * 3 * C;
    const A keepScale = drop.active() ? A(1.0 / (1.0 - drop.p)) : A(1);
    // The probabilities that multiplied V: P, or P with the dropout mask applied.
    const A* pv = P.ptr;
    int pvld = P.ld;
    if (drop.active()) {
      pdrop.assign(size_t(Tn) * Tn, A(0));
      for (int t = 0; t < Tn; t++) {
        const uint64_t base = (uint64_t(bh) * Tn + t) * Tn;
        for (int t2 = 0; t2 <= t; t2++)
          pdrop[size_t(t) * Tn + t2] = drop.keep(base + t2) ? P.ptr[size_t(t) * P.ld + t2] * keepScale : A(0);
      }
      pv = pdrop.data();
      pvld = Tn;
    }
    // dP = dO V^T, then dS in place
    gemmSerial(false, true, Tn, Tn, hs, A(1), dO.ptr, dO.ld, v.ptr, v.ld, A(0), ds.data(), Tn);
    for (int t = 0; t < Tn; t++) {
      const A* prow = P.ptr + size_t(t) * P.ld;
      A* drow = ds.data() + size_t(t) * Tn;
      if (drop.active()) {  // through the dropout mask: dP = dPdrop * mask / (1 - p)
        const uint64_t base = (uint64_t(bh) * Tn + t) * Tn;
        for (int t2 = 0; t2 <= t; t2++) drow[t2] = drop.keep(base + t2) ? drow[t2] * keepScale : A(0);
      }
      A s = 0;
#pragma omp simd reduction(+ : s)
      for (int t2 = 0; t2 <= t; t2++) s += prow[t2] * drow[t2];
      for (int t2 = 0; t2 <= t; t2++) drow[t2] = prow[t2] * (drow[t2] - s) * scale;
      for (int t2 = t + 1; t2 < Tn; t2++) drow[t2] = A(0);
    }
    if constexpr (std::is_same_v<T, A>) {
      T* dq = dbase + h * hs;
      T* dk = dbase + C + h * hs;
      T* dv = dbase + 2 * C + h * hs;
      gemmSerial(true, false, Tn, hs, Tn, A(1), pv, pvld, dO.ptr, dO.ld, A(0), dv, 3 * C);
      gemmSerial(false, false, Tn, hs, Tn, A(1), ds.data(), Tn, k.ptr, k.ld, A(0), dq, 3 * C);
      gemmSerial(true, false, Tn, hs, Tn, A(1), ds.data(), Tn, q.ptr, q.ld, A(0), dk, 3 * C);
    } else {
      std::vector<A> r(size_t(Tn) * hs);
      gemmSerial(true, false, Tn, hs, Tn, A(1), pv, pvld, dO.ptr, dO.ld, A(0), r.data(), hs);
      storeHead(dbase, r.data(), Tn, 3 * C, 2 * C + h * hs, hs);
      gemmSerial(false, false, Tn, hs, Tn, A(1), ds.data(), Tn, k.ptr, k.ld, A(0), r.data(), hs);
      storeHead(dbase, r.data(), Tn, 3 * C, h * hs, hs);
      gemmSerial(true, false, Tn, hs, Tn, A(1), ds.data(), Tn, q.ptr, q.ld, A(0), r.data(), hs);
      storeHead(dbase, r.data(), Tn, 3 * C, C + h * hs, hs);
    }
  }
}

#define WEFT_INST(T)                                                                  \
  template void attentionForward<T>(T*, T*, const T*, int, int, int, int, const Dropout&); \
  template void attentionBackward<T>(T*, const T*, const T*, const T*, int, int, int, int,  \
                                     const Dropout&);
WEFT_INST(float)
WEFT_INST(double)
WEFT_INST(bf16)
WEFT_INST(f16)
#undef WEFT_INST

}  // namespace weft::train
