// The GPT-2 MLP non-linearity: GELU with the tanh approximation (HF "gelu_new"):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
#pragma once

#include "train/dtype.h"

namespace weft::train {

template <class T> void geluForward(T* out, const T* x, size_t n);

// dx = gelu'(x) * dout (overwritten)
template <class T> void geluBackward(T* dx, const T* x, const T* dout, size_t n);

}  // namespace weft::train
