#include "train/loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "train/fastmath.h"

namespace weft::train {

template <class T>
double crossEntropyForward(Acc<T>* losses, const T* logits, const int* targets, int N, int V) {
  using A = Acc<T>;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const T* l = logits + size_t(n) * V;
    A mx = -INFINITY;
    for (int v = 0; v < V; v++) mx = std::max(mx, ld(l[v]));
    A sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; v++) sum += expFast(ld(l[v]) - mx);
    losses[n] = std::log(sum) + mx - ld(l[targets[n]]);
  }
  double total = 0;
  for (int n = 0; n < N; n++) total += double(losses[n]);
  return total / N;
}

template <class T>
void crossEntropyBackward(T* dlogits, const T* logits, const int* targets, int N, int V,
                          Acc<T> dloss) {
  using A = Acc<T>;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const T* l = logits + size_t(n) * V;
    T* d = dlogits + size_t(n) * V;
    A mx = -INFINITY;
    for (int v = 0; v < V; v++) mx = std::max(mx, ld(l[v]));
    A sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; v++) sum += expFast(ld(l[v]) - mx);
    const A inv = A(1) / sum;
#pragma omp simd
    for (int v = 0; v < V; v++) {
      A p = expFast(ld(l[v]) - mx) * inv;
      d[v] = st<T>((p - (v == targets[n] ? A(1) : A(0))) * dloss);
    }
  }
}

#define WEFT_INST(T)                                                                       \
  template double crossEntropyForward<T>(Acc<T>*, const T*, const int*, int, int);         \
  template void crossEntropyBackward<T>(T*, const T*, const int*, int, int, Acc<T>);
WEFT_INST(float)
WEFT_INST(double)
WEFT_INST(bf16)
WEFT_INST(f16)
#undef WEFT_INST

}  // namespace weft::train
