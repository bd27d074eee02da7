// BLAS: OpenBLAS (Debian libopenblas-dev, pthread flavour). Chosen by measurement on
// the 2-core AMD EPYC (AVX-512) build machine, single-precision GEMM, 1 s per shape:
//
//   shape (M x N x K)     OpenBLAS 2 thr   OpenBLAS 1 thr   BLIS 0.9 (openmp) 2 thr
//   2048 x 1536 x 384       233 GFLOP/s      117 GFLOP/s      79 GFLOP/s
//   2048 x  384 x 1536      234              116              80
//    384 x 1536 x 2048      240              118              79
//    768 x  512 x 128       207              120              79
//
// BLIS as packaged in Debian 12 ran ~3x slower on the same shapes. OpenBLAS is driven
// single-threaded from inside our OpenMP pool (see blasGemm below).
#include "train/matmul.h"

#include <cblas.h>
#include <omp.h>
#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>
#include <type_traits>
#include <vector>

#ifdef WEFT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace weft::train {

const char* blasCoretypeOverride(std::string* why) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return nullptr;
  const char* core = openblas_get_corename();
  // OpenBLAS's fallbacks for a CPU it does not recognize: kernels without AVX.
  static const char* const kGeneric[] = {"prescott", "core2", "penryn", "dunnington", "nehalem",
                                         "katmai", "coppermine", "northwood", "banias", "atom"};
  bool generic = false;
  for (const char* g : kGeneric) generic = generic || (core != nullptr && strcasecmp(core, g) == 0);
  if (!generic) return nullptr;
  __builtin_cpu_init();
  const char* pick = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    pick = __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    pick = "Haswell";
  if (pick != nullptr && why != nullptr)
    *why = std::string("OpenBLAS chose its generic '") + core + "' kernels for this CPU; using " + pick;
  return pick;
}

namespace {

void blasGemm1(bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B,
               int ldb, float* C, int ldc, bool acc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
              N, K, 1.0f, A, lda, B, ldb, acc ? 1.0f : 0.0f, C, ldc);
}

void blasGemm1(bool ta, bool tb, int M, int N, int K, const double* A, int lda, const double* B,
               int ldb, double* C, int ldc, bool acc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
              N, K, 1.0, A, lda, B, ldb, acc ? 1.0 : 0.0, C, ldc);
}

// One thread pool: OpenBLAS runs single-threaded and the OpenMP threads each take a
// block of C's rows (or columns when C is short). OpenBLAS's own pthread pool spinning
// next to the OpenMP pool oversubscribed the cores: on the 2-core build machine under
// load, tiny-preset throughput was 0.7k tok/s with both pools vs 5.2k with one thread.
template <class F>
void blasGemm(bool ta, bool tb, int M, int N, int K, const F* A, const F* B, F* C, bool acc) {
  static const bool single = (openblas_set_num_threads(1), true);
  (void)single;
  const int lda = ta ? M : K, ldb = tb ? K : N, ldc = N;
  const int nt = omp_get_max_threads();
  const double flops = 2.0 * M * N * K;
  if (nt == 1 || flops < 4e6 || omp_in_parallel()) {
    blasGemm1(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, acc);
    return;
  }
  const bool byRows = M >= 16 * nt;
#pragma omp parallel num_threads(nt)
  {
    const int id = omp_get_thread_num(), n = omp_get_num_threads();
    if (byRows) {
      const int i0 = int(int64_t(M) * id / n), i1 = int(int64_t(M) * (id + 1) / n);
      if (i1 > i0)
        blasGemm1(ta, tb, i1 - i0, N, K, ta ? A + i0 : A + size_t(i0) * lda, lda, B, ldb,
                  C + size_t(i0) * ldc, ldc, acc);
    } else {
      const int j0 = int(int64_t(N) * id / n), j1 = int(int64_t(N) * (id + 1) / n);
      if (j1 > j0)
        blasGemm1(ta, tb, M, j1 - j0, K, A, lda, tb ? B + size_t(j0) * ldb : B + j0, ldb, C + j0,
                  ldc, acc);
    }
  }
}

// Scratch for widened operands; grows, never shrinks.
struct Scratch {
  std::vector<float> a, b, c;
};
Scratch& scratch() {
  static thread_local Scratch s;
  return s;
}

#ifdef WEFT_HAVE_DNNL
bool nativeBf16() {
  static const bool on = [] {
    const char* force = std::getenv("WEFT_TRAIN_GEMM");
    if (force != nullptr && std::strcmp(force, "fp32") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
  }();
  return on;
}

// C[M,N] (+)= op(A) op(B) (+ bias[N]) in bf16 with fp32 accumulation and one
// rounding; a primitive per shape.
void onednnGemm(bool ta, bool tb, int M, int N, int K, const bf16* A, const bf16* B, bf16* C, bool acc,
                const bf16* bias = nullptr) {
  using dnnl::memory;
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  static thread_local dnnl::stream strm(eng);
  static thread_local std::map<std::tuple<int, int, int, bool, bool, bool, bool>, dnnl::matmul> cache;
  const memory::dim m = M, n = N, k = K;
  const memory::desc a({m, k}, memory::data_type::bf16, ta ? memory::dims{1, m} : memory::dims{k, 1});
  const memory::desc b({k, n}, memory::data_type::bf16, tb ? memory::dims{1, k} : memory::dims{n, 1});
  const memory::desc c({m, n}, memory::data_type::bf16, memory::dims{n, 1});
  const memory::desc bd({1, n}, memory::data_type::bf16, memory::dims{n, 1});
  auto key = std::make_tuple(M, N, K, ta, tb, acc, bias != nullptr);
  auto it = cache.find(key);
  if (it == cache.end()) {
    dnnl::primitive_attr attr;
    if (acc) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);  // C + A B, rounded once
      attr.set_post_ops(ops);
    }
    const auto desc = bias ? dnnl::matmul::desc(a, b, bd, c) : dnnl::matmul::desc(a, b, c);
    it = cache.emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, eng))).first;
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(a, eng, const_cast<bf16*>(A))},
                                       {DNNL_ARG_WEIGHTS, memory(b, eng, const_cast<bf16*>(B))},
                                       {DNNL_ARG_DST, memory(c, eng, C)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(bd, eng, const_cast<bf16*>(bias)));
  it->second.execute(strm, args);
  strm.wait();
}
#endif

}  // namespace

void gemmSerial(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                const float* B, int ldb, float beta, float* C, int ldc) {
  static const bool single = (openblas_set_num_threads(1), true);
  (void)single;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
              N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemmSerial(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda,
                const double* B, int ldb, double beta, double* C, int ldc) {
  static const bool single = (openblas_set_num_threads(1), true);
  (void)single;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
              N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <class T>
void gemm(bool transA, bool transB, int M, int N, int K, const T* A, const T* B, T* C,
          bool accumulate) {
  if (M == 0 || N == 0) return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    blasGemm(transA, transB, M, N, K, A, B, C, accumulate);
  } else {
#ifdef WEFT_HAVE_DNNL
    if constexpr (std::is_same_v<T, bf16>) {
      if (nativeBf16() && K > 0) {
        onednnGemm(transA, transB, M, N, K, A, B, C, accumulate);
        return;
      }
    }
#endif
    Scratch& s = scratch();
    size_t na = size_t(M) * K, nb = size_t(K) * N, nc = size_t(M) * N;
    if (s.a.size() < na) s.a.resize(na);
    if (s.b.size() < nb) s.b.resize(nb);
    if (s.c.size() < nc) s.c.resize(nc);
    toAcc(A, s.a.data(), na);
    toAcc(B, s.b.data(), nb);
    if (accumulate) toAcc(C, s.c.data(), nc);
    blasGemm(transA, transB, M, N, K, s.a.data(), s.b.data(), s.c.data(), accumulate);
    fromAcc(s.c.data(), C, nc);
  }
}

template <class T>
void matmulForward(T* out, const T* inp, const T* w, const T* bias, int N, int IC, int OC) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    gemm(false, false, N, OC, IC, inp, w, out, false);
    if (bias) {
#pragma omp parallel for schedule(static)
      for (int n = 0; n < N; n++) {
        T* o = out + size_t(n) * OC;
        for (int j = 0; j < OC; j++) o[j] += bias[j];
      }
    }
  } else {
#ifdef WEFT_HAVE_DNNL
    if constexpr (std::is_same_v<T, bf16>) {
      if (nativeBf16()) {
        onednnGemm(false, false, N, OC, IC, inp, w, out, false, bias);
        return;
      }
    }
#endif
    // Add the bias in fp32 before the single rounding to T.
    Scratch& s = scratch();
    size_t na = size_t(N) * IC, nb = size_t(IC) * OC, nc = size_t(N) * OC;
    if (s.a.size() < na) s.a.resize(na);
    if (s.b.size() < nb) s.b.resize(nb);
    if (s.c.size() < nc) s.c.resize(nc);
    toAcc(inp, s.a.data(), na);
    toAcc(w, s.b.data(), nb);
    float* c = s.c.data();
    blasGemm(false, false, N, OC, IC, s.a.data(), s.b.data(), c, false);
    if (bias) {
      std::vector<float> bf(OC);
      toAcc(bias, bf.data(), size_t(OC));
#pragma omp parallel for schedule(static)
      for (int n = 0; n < N; n++) {
        float* cr = c + size_t(n) * OC;
        for (int j = 0; j < OC; j++) cr[j] += bf[j];
      }
    }
    fromAcc(c, out, nc);
  }
}

template <class T>
void matmulBackward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int N,
                    int IC, int OC) {
  if (dinp) gemm(false, true, N, IC, OC, dout, w, dinp, false);
  if (dw) gemm(true, false, IC, OC, N, inp, dout, dw, true);
  if (dbias) {
    // Column sums in the accumulation type; blocks of columns in parallel so the
    // summation order is fixed (bit-reproducible for any thread count).
    constexpr int kBlock = 64;
    int nblocks = (OC + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (int bI = 0; bI < nblocks; bI++) {
      int j0 = bI * kBlock, j1 = std::min(OC, j0 + kBlock);
      Acc<T> acc[kBlock] = {};
      for (int n = 0; n < N; n++) {
        const T* d = dout + size_t(n) * OC;
        for (int j = j0; j < j1; j++) acc[j - j0] += ld(d[j]);
      }
      for (int j = j0; j < j1; j++) dbias[j] = st<T>(ld(dbias[j]) + acc[j - j0]);
    }
  }
}

#define WEFT_INST(T)                                                                      \
  template void gemm<T>(bool, bool, int, int, int, const T*, const T*, T*, bool);         \
  template void matmulForward<T>(T*, const T*, const T*, const T*, int, int, int);        \
  template void matmulBackward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, int);
WEFT_INST(float)
WEFT_INST(double)
WEFT_INST(bf16)
WEFT_INST(f16)
#undef WEFT_INST

}  // namespace weft::train
