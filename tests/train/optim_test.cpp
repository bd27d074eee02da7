#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "test_util.h"
#include "train/optim.h"

namespace weft::train {
namespace {

TEST(LrSchedule, WarmupThenCosine) {
  LrSchedule s{1e-3, 1e-4, 10, 110};
  EXPECT_DOUBLE_EQ(s.at(0), 1e-4);          // (0+1)/10 of peak
  EXPECT_DOUBLE_EQ(s.at(9), 1e-3);          // end of warmup: peak
  EXPECT_DOUBLE_EQ(s.at(10), 1e-3);         // cosine starts at peak
  EXPECT_NEAR(s.at(60), 0.55e-3, 1e-12);    // halfway: mean of peak and floor
  EXPECT_NEAR(s.at(110), 1e-4, 1e-15);      // floor
  EXPECT_NEAR(s.at(500), 1e-4, 1e-15);
  for (int i = 10; i < 110; i++) EXPECT_LE(s.at(i + 1), s.at(i) + 1e-18);
}

TEST(LossScaler, GradScalerDefaults) {
  LossScaler s;
  s.enabled = true;
  EXPECT_EQ(s.current(), 65536.0);
  s.update(true);  // inf: halve, restart the count
  EXPECT_EQ(s.current(), 32768.0);
  for (int i = 0; i < 1999; i++) s.update(false);
  EXPECT_EQ(s.current(), 32768.0);
  s.update(false);  // 2000th clean step: double
  EXPECT_EQ(s.current(), 65536.0);
  EXPECT_EQ(s.goodSteps, 0);
  LossScaler off;
  off.update(true);
  EXPECT_EQ(off.current(), 1.0);
}

// One AdamW step from zero moments: update = lr * g_hat / (|g_hat| + eps) with bias
// correction, decoupled decay only on 2-D tensors.
TEST(AdamW, FirstStepMatchesFormula) {
  auto m = makeGPT2(testing::tinyOptions(DType::f32).model, DType::f32);
  auto init = gpt2InitParams(m->config(), 1);
  m->setParams(init.data());
  auto data = testing::syntheticCorpus();
  BatchSampler smp(&data, 3);
  std::vector<int> tok(4 * 16), tgt(4 * 16);
  smp.next(4, 16, tok.data(), tgt.data());
  m->zeroGrad();
  m->forward(tok.data(), tgt.data(), 4, 16);
  m->backward(1.0);
  std::vector<float> g(m->numParams());
  m->getGrads(g.data());

  AdamWConfig cfg;
  cfg.gradClip = 0;
  cfg.weightDecay = 0.1;
  AdamW opt(*m, cfg);
  const double lr = 1e-3;
  auto r = opt.step(*m, lr, 1.0);
  ASSERT_FALSE(r.skipped);
  double norm = 0;
  for (float x : g) norm += double(x) * x;
  EXPECT_NEAR(r.gradNorm, std::sqrt(norm), 1e-6 * std::sqrt(norm));
  std::vector<float> p(m->numParams());
  m->getParams(p.data());
  for (const auto& t : m->tensors()) {
    for (size_t i = 0; i < t.numel; i += 7) {
      const size_t k = t.offset + i;
      const double gi = g[k];
      // m_hat = g, v_hat = g^2 after bias correction
      double expect = init[k] * (t.decay ? 1.0 - lr * 0.1 : 1.0) - lr * gi / (std::fabs(gi) + 1e-8);
      EXPECT_NEAR(p[k], expect, 2e-7) << t.name << "[" << i << "]";
    }
  }
}

TEST(AdamW, ClipsToGlobalNorm) {
  auto m = makeGPT2(testing::tinyOptions(DType::f32).model, DType::f32);
  auto init = gpt2InitParams(m->config(), 1);
  m->setParams(init.data());
  // Gradient = 3 everywhere: norm 3 sqrt(n), clipped to 0.5.
  float* g = static_cast<float*>(m->gradData());
  for (size_t i = 0; i < m->numParams(); i++) g[i] = 3.0f;
  AdamWConfig cfg;
  cfg.gradClip = 0.5;
  AdamW opt(*m, cfg);
  auto r = opt.step(*m, 1e-3, 1.0);
  EXPECT_NEAR(r.gradNorm, 3.0 * std::sqrt(double(m->numParams())), 1e-3);
  // After clipping each component is 0.5/sqrt(n): first moment (1-beta1) of it.
  const double gc = 0.5 / std::sqrt(double(m->numParams()));
  EXPECT_NEAR(opt.m[0], (1 - cfg.beta1) * gc, 1e-6 * gc);
}

TEST(AdamW, SkipsNonFiniteGradients) {
  auto m = makeGPT2(testing::tinyOptions(DType::f16).model, DType::f16);
  auto init = gpt2InitParams(m->config(), 1);
  m->setParams(init.data());
  m->zeroGrad();
  static_cast<f16*>(m->gradData())[5] = toF16(std::numeric_limits<float>::infinity());
  AdamW opt(*m, AdamWConfig{});
  std::vector<float> before(m->numParams()), after(m->numParams());
  m->getParams(before.data());
  auto r = opt.step(*m, 1e-3, 65536.0);
  EXPECT_TRUE(r.skipped);
  EXPECT_EQ(opt.t, 0);
  m->getParams(after.data());
  EXPECT_EQ(before, after);
}

// Accumulating K micro-batches of B equals one batch of K*B (same windows), in fp64.
TEST(Trainer, GradAccumulationEqualsLargerBatch) {
  auto data = testing::syntheticCorpus();
  auto o1 = testing::tinyOptions(DType::f64);
  o1.batch = 8;
  auto o2 = o1;
  o2.batch = 4;
  o2.gradAccum = 2;
  Trainer a(o1, &data, &data), b(o2, &data, &data);
  auto sa = a.trainStep();
  auto sb = b.trainStep();
  EXPECT_NEAR(sa.loss, sb.loss, 1e-12);
  const double* ga = static_cast<const double*>(a.model().gradData());
  const double* gb = static_cast<const double*>(b.model().gradData());
  double maxDiff = 0, maxAbs = 0;
  for (size_t i = 0; i < a.model().numParams(); i++) {
    maxDiff = std::max(maxDiff, std::fabs(ga[i] - gb[i]));
    maxAbs = std::max(maxAbs, std::fabs(ga[i]));
  }
  EXPECT_LE(maxDiff, 1e-12 * maxAbs);
}

}  // namespace
}  // namespace weft::train
