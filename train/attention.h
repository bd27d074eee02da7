// Causal multi-head self-attention on the fused qkv projection (HF GPT-2 layout:
// qkv[b,t,:] = [q | k | v], each C wide, head h at columns h*hs .. h*hs+hs-1).
// Scores are scaled by 1/sqrt(hs); softmax in the accumulation type.
#pragma once

#include "train/dtype.h"
#include "train/ops.h"

namespace weft::train {

// out [B,T,C]; att [B,NH,T,T] receives the softmax probabilities (zeros above the
// diagonal, before dropout) for the backward pass. With an active `drop` the
// probabilities are dropped out (HF attn_pdrop) before multiplying V; element
// (b,h,t,t2) uses mask index ((b*NH+h)*T + t)*T + t2.
template <class T>
void attentionForward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH,
                      const Dropout& drop = {});

// dqkv [B,T,3C] is overwritten.
template <class T>
void attentionBackward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int C,
                       int NH, const Dropout& drop = {});

}  // namespace weft::train
