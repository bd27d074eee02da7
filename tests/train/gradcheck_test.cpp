// Finite-difference gradient check of the hand-written GPT-2 backward pass, for every
// parameter tensor, in fp64; plus fp32/bf16/fp16 agreement with fp64.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "train/gpt2.h"
#include "train/rng.h"

namespace weft::train {
namespace {

GPT2Config tinyConfig() {
  GPT2Config c;
  c.vocabSize = 32;
  c.maxSeq = 8;
  c.numLayers = 2;
  c.numHeads = 2;
  c.channels = 16;
  return c;
}

// Random parameters with every tensor (LayerNorm and biases included) non-trivial.
std::vector<double> randomParams(const Model& m, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> p(m.numParams());
  for (const auto& t : m.tensors()) {
    const bool lnWeight = t.name.find(".ln_") != std::string::npos && t.name.find("weight") != std::string::npos;
    for (size_t i = 0; i < t.numel; i++) p[t.offset + i] = (lnWeight ? 1.0 : 0.0) + 0.2 * rng.normal();
  }
  return p;
}

struct Batch {
  int B = 2, T = 8;
  std::vector<int> tokens, targets;
};

Batch randomBatch(int V, uint64_t seed) {
  Batch b;
  Rng rng(seed);
  for (int i = 0; i < b.B * b.T; i++) {
    b.tokens.push_back(int(rng.below(V)));
    b.targets.push_back(int(rng.below(V)));
  }
  b.tokens[3] = b.tokens[5];  // repeated token: exercises embedding-gradient accumulation
  return b;
}

// Thousands of tiny forwards: one thread avoids parallel-region overhead on busy CI.
struct SingleThread {
  int saved = omp_get_max_threads();
  SingleThread() { omp_set_num_threads(1); }
  ~SingleThread() { omp_set_num_threads(saved); }
};

void gradCheckEveryTensor(double dropout) {
  SingleThread one;
  auto m = makeGPT2(tinyConfig(), DType::f64);
  // Dropout masks are a pure function of the seed: identical in every forward below.
  m->setDropout(dropout);
  m->setDropoutSeed(12345);
  double* p = static_cast<double*>(m->paramData());
  const double* g = static_cast<const double*>(m->gradData());
  auto init = randomParams(*m, 7);
  std::copy(init.begin(), init.end(), p);
  Batch b = randomBatch(m->config().vocabSize, 11);

  m->zeroGrad();
  const double loss = m->forward(b.tokens.data(), b.targets.data(), b.B, b.T);
  ASSERT_TRUE(std::isfinite(loss));
  m->backward(1.0);
  std::vector<double> analytic(g, g + m->numParams());

  // Central differences, step 1e-5: truncation error O(h^2 f''') ~ 1e-10 and
  // round-off ~ 1e-16 / 1e-5 = 1e-11 relative to the loss (~3.5).
  // Tolerance per element: |num - ana| <= 1e-7 + 1e-5 |ana|.
  const double h = 1e-5;
  for (const auto& t : m->tensors()) {
    double maxErr = 0, maxAbs = 0;
    for (size_t i = 0; i < t.numel; i++) {
      const size_t k = t.offset + i;
      const double saved = p[k];
      p[k] = saved + h;
      const double lp = m->forward(b.tokens.data(), b.targets.data(), b.B, b.T);
      p[k] = saved - h;
      const double lm = m->forward(b.tokens.data(), b.targets.data(), b.B, b.T);
      p[k] = saved;
      const double num = (lp - lm) / (2 * h);
      const double err = std::fabs(num - analytic[k]);
      maxErr = std::max(maxErr, err);
      maxAbs = std::max(maxAbs, std::fabs(analytic[k]));
      ASSERT_LE(err, 1e-7 + 1e-5 * std::fabs(analytic[k]))
          << t.name << "[" << i << "] numeric " << num << " analytic " << analytic[k];
    }
    EXPECT_GT(maxAbs, 1e-6) << t.name << ": gradient is identically ~0, check is vacuous";
    SCOPED_TRACE(t.name + " max err " + std::to_string(maxErr));
  }
}

TEST(GradCheck, EveryTensorFp64) { gradCheckEveryTensor(0.0); }
// Embedding, attention-probability and residual dropout, p = 0.2.
TEST(GradCheck, EveryTensorFp64WithDropout) { gradCheckEveryTensor(0.2); }

// Lower precisions against the fp64 reference at the same (rounded) parameters.
void compareWithFp64(DType dt, double lossTol, double gradRelTol) {
  auto ref = makeGPT2(tinyConfig(), DType::f64);
  auto m = makeGPT2(tinyConfig(), dt);
  auto init = randomParams(*ref, 3);
  std::vector<float> pf(init.begin(), init.end());
  m->setParams(pf.data());
  m->getParams(pf.data());  // rounded to dt, so both models see identical parameters
  std::copy(pf.begin(), pf.end(), static_cast<double*>(ref->paramData()));
  Batch b = randomBatch(ref->config().vocabSize, 5);
  ref->zeroGrad();
  m->zeroGrad();
  const double lr = ref->forward(b.tokens.data(), b.targets.data(), b.B, b.T);
  const double lm = m->forward(b.tokens.data(), b.targets.data(), b.B, b.T);
  EXPECT_NEAR(lm, lr, lossTol * std::fabs(lr)) << dtypeName(dt);
  ref->backward(1.0);
  m->backward(1.0);
  std::vector<float> gm(m->numParams());
  m->getGrads(gm.data());
  const double* gr = static_cast<const double*>(ref->gradData());
  for (const auto& t : m->tensors()) {
    double num = 0, den = 0;
    for (size_t i = 0; i < t.numel; i++) {
      const double d = double(gm[t.offset + i]) - gr[t.offset + i];
      num += d * d;
      den += gr[t.offset + i] * gr[t.offset + i];
    }
    EXPECT_LE(std::sqrt(num / den), gradRelTol) << dtypeName(dt) << " " << t.name;
  }
}

// fp32: loss within 1e-6 relative, every tensor's gradient within 1e-4 (relative L2).
TEST(GradCheck, Fp32MatchesFp64) { compareWithFp64(DType::f32, 1e-6, 1e-4); }
// bf16 (8-bit mantissa): loss within 1%, gradients within 10% relative L2.
TEST(GradCheck, Bf16MatchesFp64) { compareWithFp64(DType::bf16, 1e-2, 0.1); }
// fp16 (11-bit mantissa): loss within 0.2%, gradients within 2% relative L2.
TEST(GradCheck, Fp16MatchesFp64) { compareWithFp64(DType::f16, 2e-3, 2e-2); }

}  // namespace
}  // namespace weft::train
