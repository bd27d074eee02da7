// Softmax cross-entropy over the vocabulary, computed in the accumulation type
// (fp32) from logits stored in T.
#pragma once

#include "train/dtype.h"

namespace weft::train {

// losses[n] = -log softmax(logits[n,:])[targets[n]]; returns the mean.
template <class T>
double crossEntropyForward(Acc<T>* losses, const T* logits, const int* targets, int N, int V);

// dlogits[n,:] = (softmax(logits[n,:]) - onehot(targets[n])) * dloss   (overwritten)
template <class T>
void crossEntropyBackward(T* dlogits, const T* logits, const int* targets, int N, int V,
                          Acc<T> dloss);

}  // namespace weft::train
