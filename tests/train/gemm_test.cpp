// bf16 GEMMs (oneDNN's matmul on CPUs with native bf16, the widening sgemm path
// elsewhere) against an fp64 product of the same bf16 inputs: every combination of
// transposes, with and without accumulation into C, and the linear layer's bias.
// Both paths accumulate in fp32 and round once, so each result is within one bf16
// rounding (2^-8 relative) plus fp32 summation error of the exact value.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "train/matmul.h"
#include "train/rng.h"

namespace weft::train {
namespace {

std::vector<bf16> randomBf16(size_t n, Rng& rng) {
  std::vector<bf16> v(n);
  for (auto& x : v) x = st<bf16>(float(rng.normal()));
  return v;
}

double at(const std::vector<bf16>& m, int r, int c, int cols) { return double(ld(m[size_t(r) * cols + c])); }

TEST(GemmBf16, MatchesFp64ForEveryTransposeAndAccumulate) {
  Rng rng(7);
  const int M = 37, N = 53, K = 129;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool acc : {false, true}) {
        auto A = randomBf16(size_t(M) * K, rng), B = randomBf16(size_t(K) * N, rng), C = randomBf16(size_t(M) * N, rng);
        const auto C0 = C;
        gemm(ta, tb, M, N, K, A.data(), B.data(), C.data(), acc);
        double worst = 0;
        for (int i = 0; i < M; i++)
          for (int j = 0; j < N; j++) {
            double ref = acc ? at(C0, i, j, N) : 0.0, mag = std::fabs(ref);
            for (int k = 0; k < K; k++) {
              const double a = ta ? at(A, k, i, M) : at(A, i, k, K), b = tb ? at(B, j, k, K) : at(B, k, j, N);
              ref += a * b;
              mag += std::fabs(a * b);
            }
            // One bf16 rounding of the result plus fp32 accumulation (K terms).
            const double err = std::fabs(double(ld(C[size_t(i) * N + j])) - ref);
            worst = std::max(worst, err / (std::fabs(ref) * 0x1p-8 + mag * K * 0x1p-24 + 1e-30));
          }
        EXPECT_LE(worst, 1.0) << "ta " << ta << " tb " << tb << " acc " << acc;
      }
}

TEST(GemmBf16, LinearLayerAddsTheBiasBeforeRounding) {
  Rng rng(11);
  const int N = 64, IC = 96, OC = 80;
  auto x = randomBf16(size_t(N) * IC, rng), w = randomBf16(size_t(IC) * OC, rng), b = randomBf16(OC, rng);
  std::vector<bf16> out(size_t(N) * OC);
  matmulForward(out.data(), x.data(), w.data(), b.data(), N, IC, OC);
  double worst = 0;
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      double ref = double(ld(b[size_t(o)])), mag = std::fabs(ref);
      for (int i = 0; i < IC; i++) {
        ref += at(x, n, i, IC) * at(w, i, o, OC);
        mag += std::fabs(at(x, n, i, IC) * at(w, i, o, OC));
      }
      const double err = std::fabs(double(ld(out[size_t(n) * OC + o])) - ref);
      worst = std::max(worst, err / (std::fabs(ref) * 0x1p-8 + mag * IC * 0x1p-24 + 1e-30));
    }
  EXPECT_LE(worst, 1.0);
}

}  // namespace
}  // namespace weft::train
