#include "train/ops.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace weft::train {

template <class T>
void encoderForward(T* out, const int* tokens, const T* wte, const T* wpe, int B, int Tn, int C) {
  using A = Acc<T>;
#pragma omp parallel
  {
    std::vector<A> e(C), p(C);
#pragma omp for schedule(static)
    for (int bt = 0; bt < B * Tn; bt++) {
      toAccSerial(wte + size_t(tokens[bt]) * C, e.data(), size_t(C));
      toAccSerial(wpe + size_t(bt % Tn) * C, p.data(), size_t(C));
      for (int i = 0; i < C; i++) e[i] += p[i];
      fromAccSerial(e.data(), out + size_t(bt) * C, size_t(C));
    }
  }
}

template <class T>
void encoderBackward(T* dwte, T* dwpe, const T* dout, const int* tokens, int B, int Tn, int C,
                     int V) {
  using A = Acc<T>;
  // Positions: sum over the batch.
#pragma omp parallel for schedule(static)
  for (int t = 0; t < Tn; t++) {
    std::vector<A> acc(C, A(0));
    for (int b = 0; b < B; b++) {
      const T* d = dout + (size_t(b) * Tn + t) * C;
      for (int i = 0; i < C; i++) acc[i] += ld(d[i]);
    }
    T* w = dwpe + size_t(t) * C;
    for (int i = 0; i < C; i++) w[i] = st<T>(ld(w[i]) + acc[i]);
  }
  // Tokens: bucket positions by token id (counting sort), then one task per id.
  const int N = B * Tn;
  std::vector<int> start(V + 1, 0), order(N);
  for (int i = 0; i < N; i++) start[tokens[i] + 1]++;
  for (int v = 0; v < V; v++) start[v + 1] += start[v];
  {
    std::vector<int> fill(start.begin(), start.end() - 1);
    for (int i = 0; i < N; i++) order[fill[tokens[i]]++] = i;
  }
#pragma omp parallel for schedule(dynamic, 8)
  for (int v = 0; v < V; v++) {
    if (start[v] == start[v + 1]) continue;
    std::vector<A> acc(C, A(0));
    for (int j = start[v]; j < start[v + 1]; j++) {
      const T* d = dout + size_t(order[j]) * C;
      for (int i = 0; i < C; i++) acc[i] += ld(d[i]);
    }
    T* w = dwte + size_t(v) * C;
    for (int i = 0; i < C; i++) w[i] = st<T>(ld(w[i]) + acc[i]);
  }
}

template <class T> void residualForward(T* out, const T* a, const T* b, size_t n) {
  using A = Acc<T>;
  constexpr long long kChunk = 1024;
  const long long nn = (long long)n, chunks = (nn + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 16)
  for (long long c = 0; c < chunks; c++) {
    const long long i0 = c * kChunk, len = std::min(kChunk, nn - i0);
    A x[kChunk], y[kChunk];
    toAccSerial(a + i0, x, size_t(len));
    toAccSerial(b + i0, y, size_t(len));
    for (long long i = 0; i < len; i++) x[i] += y[i];
    fromAccSerial(x, out + i0, size_t(len));
  }
}

template <class T> void addInPlace(T* dst, const T* src, size_t n) {
  long long nn = (long long)n;
#pragma omp parallel for schedule(static) if (nn > 32768)
  for (long long i = 0; i < nn; i++) dst[i] = st<T>(ld(dst[i]) + ld(src[i]));
}

template <class T> void fillZero(T* p, size_t n) { std::memset(static_cast<void*>(p), 0, n * sizeof(T)); }

template <class T> void dropoutApply(T* out, const T* in, size_t n, const Dropout& d) {
  using A = Acc<T>;
  const A scale = A(1.0 / (1.0 - d.p));
  long long nn = (long long)n;
#pragma omp parallel for schedule(static) if (nn > 32768)
  for (long long i = 0; i < nn; i++) out[i] = d.keep(uint64_t(i)) ? st<T>(ld(in[i]) * scale) : st<T>(A(0));
}

#define WEFT_INST(T)                                                                        \
  template void dropoutApply<T>(T*, const T*, size_t, const Dropout&);                      \
  template void encoderForward<T>(T*, const int*, const T*, const T*, int, int, int);       \
  template void encoderBackward<T>(T*, T*, const T*, const int*, int, int, int, int);       \
  template void residualForward<T>(T*, const T*, const T*, size_t);                         \
  template void addInPlace<T>(T*, const T*, size_t);                                        \
  template void fillZero<T>(T*, size_t);
WEFT_INST(float)
WEFT_INST(double)
WEFT_INST(bf16)
WEFT_INST(f16)
#undef WEFT_INST

}  // namespace weft::train
