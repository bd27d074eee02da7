#include "train/mlp.h"

#include <cmath>

namespace weft::train {

namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;
}  // namespace

template <class T> void geluForward(T* out, const T* x, size_t n) {
  using A = Acc<T>;
  long long nn = (long long)n;
#pragma omp parallel for schedule(static) if (nn > 16384)
  for (long long i = 0; i < nn; i++) {
    A v = ld(x[i]);
    A u = A(kSqrt2OverPi) * (v + A(kCubic) * v * v * v);
    out[i] = st<T>(A(0.5) * v * (A(1) + std::tanh(u)));
  }
}

template <class T> void geluBackward(T* dx, const T* x, const T* dout, size_t n) {
  using A = Acc<T>;
  long long nn = (long long)n;
#pragma omp parallel for schedule(static) if (nn > 16384)
  for (long long i = 0; i < nn; i++) {
    A v = ld(x[i]);
    A u = A(kSqrt2OverPi) * (v + A(kCubic) * v * v * v);
    A th = std::tanh(u);
    A du = A(kSqrt2OverPi) * (A(1) + A(3 * kCubic) * v * v);
    A g = A(0.5) * (A(1) + th) + A(0.5) * v * (A(1) - th * th) * du;
    dx[i] = st<T>(g * ld(dout[i]));
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
