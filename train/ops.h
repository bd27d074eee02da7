// Small element-wise and embedding kernels of the GPT-2 forward/backward pass.
#pragma once

#include "train/dtype.h"

namespace weft::train {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
template <class T>
void encoderForward(T* out, const int* tokens, const T* wte, const T* wpe, int B, int Tn, int C);

// dwte[tok] += dout rows of that token, dwpe[t] += sum over b; sums in Acc<T>, one
// rounding per touched row, in a fixed order.
template <class T>
void encoderBackward(T* dwte, T* dwpe, const T* dout, const int* tokens, int B, int Tn, int C,
                     int V);

// out = a + b
template <class T> void residualForward(T* out, const T* a, const T* b, size_t n);

// dst += src
template <class T> void addInPlace(T* dst, const T* src, size_t n);

template <class T> void fillZero(T* p, size_t n);

}  // namespace weft::train

namespace weft::train {

// Dropout with stateless masks: element i of stream s is kept iff
// hash(seed, s, i) >= p * 2^64, and kept values are scaled by 1/(1-p). The backward
// pass and activation-checkpointing recompute regenerate the mask instead of storing
// it, and a resumed run draws the same masks (the seed comes from the step counter).
struct Dropout {
  double p = 0;
  uint64_t seed = 0;
  uint64_t stream = 0;

  bool active() const { return p > 0; }
  Dropout at(uint64_t s) const { return Dropout{p, seed, s}; }
  bool keep(uint64_t i) const {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1) + 0xD1B54A32D192ED03ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return double(z) >= p * 18446744073709551616.0;
  }
};

// out[i] = in[i] * mask[i] / (1 - p); in-place allowed.
template <class T> void dropoutApply(T* out, const T* in, size_t n, const Dropout& d);

}  // namespace weft::train
