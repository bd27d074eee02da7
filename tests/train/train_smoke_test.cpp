// Short training runs on a synthetic corpus: the loss must fall in every precision,
// and low-precision storage must really be low precision.
#include <gtest/gtest.h>

#include <cstring>

#include "test_util.h"
#include "train/ops.h"

namespace weft::train {
namespace {

class Smoke : public ::testing::TestWithParam<DType> {};

TEST_P(Smoke, LossFalls) {
  auto data = testing::syntheticCorpus();
  auto opt = testing::tinyOptions(GetParam());
  Trainer t(opt, &data, &data);
  const double before = t.evalLoss();
  EXPECT_NEAR(before, std::log(256.0), 0.3);  // ~uniform at init
  int skipped = 0;
  for (int i = 0; i < opt.steps; i++) skipped += t.trainStep().skipped;
  const double after = t.evalLoss();
  EXPECT_LT(after, 0.6 * before) << dtypeName(GetParam()) << " " << before << " -> " << after;
  EXPECT_LE(skipped, 2);
}

// Same seed, same data: bf16 and fp16 (with loss scaling) end within 2% of fp32.
TEST(MixedPrecision, TracksFp32) {
  auto data = testing::syntheticCorpus();
  double val[3];
  int i = 0;
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    Trainer t(testing::tinyOptions(dt), &data, &data);
    for (int s = 0; s < t.options().steps; s++) t.trainStep();
    val[i++] = t.evalLoss();
  }
  EXPECT_NEAR(val[1], val[0], 0.02 * val[0]) << "bf16";
  EXPECT_NEAR(val[2], val[0], 0.02 * val[0]) << "fp16";
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, Smoke, ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtypeName(info.param)); });

TEST(Storage, LowPrecisionHalvesMemory) {
  GPT2Config cfg{256, 16, 2, 2, 32};
  auto a = makeGPT2(cfg, DType::f32), b = makeGPT2(cfg, DType::bf16);
  std::vector<int> tok(2 * 16, 1);
  a->forward(tok.data(), tok.data(), 2, 16);
  b->forward(tok.data(), tok.data(), 2, 16);
  EXPECT_LT(b->activationBytes(), a->activationBytes() * 6 / 10);
  EXPECT_EQ(dtypeSize(b->dtype()), 2u);
}

TEST(Dropout, ActiveOnlyInTraining) {
  GPT2Config cfg{256, 16, 2, 2, 32};
  auto m = makeGPT2(cfg, DType::f32);
  auto p = gpt2InitParams(cfg, 3);
  m->setParams(p.data());
  std::vector<int> tok(2 * 16), tgt(2 * 16);
  for (int i = 0; i < 32; i++) tok[i] = tgt[(i + 31) % 32] = (i * 7) % 256;
  const double plain = m->forward(tok.data(), tgt.data(), 2, 16);
  m->setDropout(0.3);
  m->setDropoutSeed(1);
  const double d1 = m->forward(tok.data(), tgt.data(), 2, 16);
  EXPECT_NE(d1, plain);
  EXPECT_EQ(m->forward(tok.data(), tgt.data(), 2, 16), d1);  // same seed, same masks
  m->setDropoutSeed(2);
  EXPECT_NE(m->forward(tok.data(), tgt.data(), 2, 16), d1);
  m->setTraining(false);
  EXPECT_EQ(m->forward(tok.data(), tgt.data(), 2, 16), plain);
  // Mask statistics: keep rate 1 - p.
  Dropout d{0.3, 5, 9};
  int kept = 0;
  for (uint64_t i = 0; i < 100000; i++) kept += d.keep(i);
  EXPECT_NEAR(kept / 100000.0, 0.7, 0.01);
}

TEST(Generate, DeterministicBySeed) {
  auto data = testing::syntheticCorpus();
  Trainer t(testing::tinyOptions(DType::f32), &data, &data);
  EXPECT_EQ(t.generate("the ", 20, 0.8, 1), t.generate("the ", 20, 0.8, 1));
  EXPECT_EQ(t.generate("the ", 20, 0.8, 1).size(), 20u);
}

}  // namespace
}  // namespace weft::train

namespace weft::train {
namespace {

// Checkpointed backward recomputes each block exactly: gradients are bit-identical,
// and activation memory drops to one block's worth plus the residual stream.
TEST(ActivationCheckpointing, SameGradientsLessMemory) {
  for (DType dt : {DType::f32, DType::bf16}) {
    GPT2Config cfg{256, 32, 4, 2, 32};
    auto a = makeGPT2(cfg, dt), b = makeGPT2(cfg, dt);
    auto p = gpt2InitParams(cfg, 3);
    a->setParams(p.data());
    b->setParams(p.data());
    b->setActivationCheckpointing(true);
    for (auto* m : {a.get(), b.get()}) {  // recompute must regenerate the same masks
      m->setDropout(0.1);
      m->setDropoutSeed(77);
    }
    auto data = testing::syntheticCorpus(4000);
    BatchSampler smp(&data, 1);
    std::vector<int> tok(4 * 32), tgt(4 * 32);
    smp.next(4, 32, tok.data(), tgt.data());
    a->zeroGrad();
    b->zeroGrad();
    EXPECT_EQ(a->forward(tok.data(), tgt.data(), 4, 32), b->forward(tok.data(), tgt.data(), 4, 32));
    a->backward(1.0);
    b->backward(1.0);
    EXPECT_EQ(std::memcmp(a->gradData(), b->gradData(), a->numParams() * dtypeSize(dt)), 0) << dtypeName(dt);
    EXPECT_LT(b->activationBytes(), a->activationBytes() * 6 / 10)
        << a->activationBytes() << " vs " << b->activationBytes();
  }
}

}  // namespace
}  // namespace weft::train
