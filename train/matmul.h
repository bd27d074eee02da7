// Dense layers: GEMMs through BLAS with fp32 (fp64) accumulation.
//
// Low-precision operands are widened into fp32 scratch for the BLAS call and the
// result rounded once on store, so every dot product accumulates in fp32.
#pragma once

#include <string>

#include "train/dtype.h"

namespace weft::train {

// OpenBLAS (0.3.21 in Debian 12) runs its generic pre-AVX kernels ("Prescott") on
// CPUs newer than it knows, 4.5x slower on an Emerald Rapids Xeon. When the
// library did that and the CPU has AVX-512 or AVX2, this names the kernel set to
// use instead (OPENBLAS_CORETYPE, read when the library loads: the caller sets it
// and re-executes); nullptr when nothing needs changing or the user set the
// variable. *why says what was detected.
const char* blasCoretypeOverride(std::string* why);

// C[M,N] (+)= op(A)[M,K] * op(B)[K,N], row-major, contiguous leading dimensions
// (A is stored [M,K], or [K,M] when transA; B is [K,N], or [N,K] when transB).
template <class T>
void gemm(bool transA, bool transB, int M, int N, int K, const T* A, const T* B, T* C,
          bool accumulate);

// Single-threaded BLAS call with explicit leading dimensions, for use inside parallel
// regions: C = alpha op(A) op(B) + beta C.
void gemmSerial(bool transA, bool transB, int M, int N, int K, float alpha, const float* A,
                int lda, const float* B, int ldb, float beta, float* C, int ldc);
void gemmSerial(bool transA, bool transB, int M, int N, int K, double alpha, const double* A,
                int lda, const double* B, int ldb, double beta, double* C, int ldc);

// out[N,OC] = inp[N,IC] @ w[IC,OC] + bias[OC]   (HF Conv1D layout: w is [in, out]).
template <class T>
void matmulForward(T* out, const T* inp, const T* w, const T* bias, int N, int IC, int OC);

// dinp = dout @ w^T (overwritten); dw += inp^T @ dout; dbias += column sums of dout.
// A null dinp, dw or dbias is not computed (a split backward: input gradient now,
// weight gradient later).
template <class T>
void matmulBackward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int N,
                    int IC, int OC);

}  // namespace weft::train
