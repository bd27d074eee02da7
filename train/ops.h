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
