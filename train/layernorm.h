// LayerNorm over the last dimension (eps 1e-5 as GPT-2). Statistics are computed
// and kept in the accumulation type (fp32) whatever the storage type.
#pragma once

#include "train/dtype.h"

namespace weft::train {

constexpr double kLayerNormEps = 1e-5;

// out[n,:] = (x[n,:] - mean) * rstd * w + b; saves mean[n], rstd[n].
template <class T>
void layernormForward(T* out, Acc<T>* mean, Acc<T>* rstd, const T* x, const T* w, const T* b,
                      int N, int C);

// dx += (accumulated); dw += ; db += .
template <class T>
void layernormBackward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w,
                       const Acc<T>* mean, const Acc<T>* rstd, int N, int C);

}  // namespace weft::train
