#include "train/loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "train/fastmath.h"

namespace weft::train {

template <class T>
double crossEntropyForward(Acc<T>* losses, const T* logits, const int* targets, int N, int V) {
  using A = Acc<T>;
#pragma omp parallel
  {
    std::vector<A> l(V);
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
      toAccSerial(logits + size_t(n) * V, l.data(), size_t(V));
      A mx = l[0];
      for (int v = 1; v < V; v++) mx = std::max(mx, l[v]);
      A sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int v = 0; v < V; v++) sum += expFast(l[v] - mx);
      losses[n] = std::log(sum) + mx - l[targets[n]];
    }
  }
  double total = 0;
  for (int n = 0; n < N; n++) total += double(losses[n]);
  return total / N;
}

template <class T>
void crossEntropyBackward(T* dlogits, const T* logits, const int* targets, int N, int V,
                          Acc<T> dloss) {
  using A = Acc<T>;
#pragma omp parallel
  {
    std::vector<A> l(V);
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
      toAccSerial(logits + size_t(n) * V, l.data(), size_t(V));
      A mx = l[0];
      for (int v = 1; v < V; v++) mx = std::max(mx, l[v]);
      A sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int v = 0; v < V; v++) {
        l[v] = expFast(l[v] - mx);
        sum += l[v];
      }
      const A scale = dloss / sum;
#pragma omp simd
      for (int v = 0; v < V; v++) l[v] *= scale;
      l[targets[n]] -= dloss;
      fromAccSerial(l.data(), dlogits + size_t(n) * V, size_t(V));
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
