// A run interrupted by save/load continues bit-identically: parameters, master
// weights, AdamW moments, loss scale and the data stream all match an uninterrupted run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "test_util.h"

namespace fs = std::filesystem;

namespace weft::train {
namespace {

void expectSameState(Trainer& a, Trainer& b) {
  const size_t n = a.model().numParams();
  EXPECT_EQ(std::memcmp(a.model().paramData(), b.model().paramData(), n * dtypeSize(a.model().dtype())), 0);
  EXPECT_EQ(a.optimizer().master, b.optimizer().master);
  EXPECT_EQ(a.optimizer().m, b.optimizer().m);
  EXPECT_EQ(a.optimizer().v, b.optimizer().v);
  EXPECT_EQ(a.optimizer().t, b.optimizer().t);
  EXPECT_EQ(a.scaler().scale, b.scaler().scale);
  EXPECT_EQ(a.scaler().goodSteps, b.scaler().goodSteps);
  EXPECT_EQ(a.step(), b.step());
}

class Resume : public ::testing::TestWithParam<DType> {};

TEST_P(Resume, BitIdentical) {
  const DType dt = GetParam();
  auto data = testing::syntheticCorpus();
  auto opt = testing::tinyOptions(dt);
  opt.steps = 8;
  opt.gradAccum = 2;
  opt.dropout = 0.1;  // masks must continue identically too
  const fs::path dir = fs::temp_directory_path() /
                       ("weft-train-ckpt-" + std::string(dtypeName(dt)) + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);

  Trainer straight(opt, &data, &data);
  std::vector<double> lossA;
  for (int i = 0; i < opt.steps; i++) lossA.push_back(straight.trainStep().loss);

  std::vector<double> lossB;
  {
    Trainer first(opt, &data, &data);
    for (int i = 0; i < 4; i++) lossB.push_back(first.trainStep().loss);
    first.save(dir.string());
  }
  Trainer resumed(opt, &data, &data);
  resumed.load(dir.string());
  EXPECT_EQ(resumed.step(), 4);
  for (int i = 4; i < opt.steps; i++) lossB.push_back(resumed.trainStep().loss);

  EXPECT_EQ(lossA, lossB);
  expectSameState(straight, resumed);
  EXPECT_EQ(straight.evalLoss(), resumed.evalLoss());
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, Resume, ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtypeName(info.param)); });

TEST(Checkpoint, RejectsMismatchedRun) {
  auto data = testing::syntheticCorpus();
  auto opt = testing::tinyOptions(DType::f32);
  const fs::path dir = fs::temp_directory_path() / ("weft-train-ckpt-mismatch-" + std::to_string(::getpid()));
  Trainer a(opt, &data, &data);
  a.trainStep();
  a.save(dir.string());
  auto other = opt;
  other.dtype = DType::bf16;
  Trainer b(other, &data, &data);
  EXPECT_THROW(b.load(dir.string()), std::runtime_error);
  auto wider = opt;
  wider.model.channels = 64;
  Trainer c(wider, &data, &data);
  EXPECT_THROW(c.load(dir.string()), std::runtime_error);
  EXPECT_THROW(c.load((dir / "nope").string()), std::runtime_error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace weft::train
