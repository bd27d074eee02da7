#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "test_util.h"
#include "train/data.h"

namespace fs = std::filesystem;

namespace weft::train {
namespace {

fs::path tempDir(const char* name) {
  fs::path d = fs::temp_directory_path() / (std::string("weft-train-test-") + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(Tokenizer, ByteLevelRoundTrip) {
  std::string s = "Hello, world!\n\t\xc3\xa9\x01\xff";
  auto t = ByteTokenizer::encode(s);
  ASSERT_EQ(t.size(), s.size());
  EXPECT_EQ(t[0], 'H');
  EXPECT_EQ(t.back(), 255);
  std::vector<int> ti(t.begin(), t.end());
  EXPECT_EQ(ByteTokenizer::decode(ti), s);
}

TEST(TokenFile, RoundTripAndHeader) {
  fs::path d = tempDir("tok");
  TokenFile f;
  f.vocabSize = 256;
  f.tokens = {1, 2, 3, 255, 0, 65};
  writeTokenFile((d / "a.tok").string(), f);
  EXPECT_EQ(fs::file_size(d / "a.tok"), 32u + 2 * 6);
  TokenFile g = readTokenFile((d / "a.tok").string());
  EXPECT_EQ(g.vocabSize, 256u);
  EXPECT_EQ(g.tokens, f.tokens);
  // Corrupt magic, truncated file, token beyond vocab: all rejected.
  {
    std::fstream io(d / "a.tok", std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(0);
    io.put('X');
  }
  EXPECT_THROW(readTokenFile((d / "a.tok").string()), std::runtime_error);
  writeTokenFile((d / "b.tok").string(), f);
  fs::resize_file(d / "b.tok", 32 + 5);
  EXPECT_THROW(readTokenFile((d / "b.tok").string()), std::runtime_error);
  f.vocabSize = 100;
  writeTokenFile((d / "c.tok").string(), f);
  EXPECT_THROW(readTokenFile((d / "c.tok").string()), std::runtime_error);
  fs::remove_all(d);
}

TEST(Corpus, FortuneSplitIsDeterministic) {
  fs::path src = tempDir("src");
  {
    std::ofstream a(src / "alpha");
    for (int i = 0; i < 200; i++) a << "cookie number " << i << "\nsecond line\n%\n";
    std::ofstream b(src / "beta");
    b << "last one\n";
    std::ofstream(src / "alpha.dat") << "binary index, skipped";
  }
  fs::path o1 = tempDir("o1"), o2 = tempDir("o2");
  std::string m1 = prepareFortunes(src.string(), o1.string(), 0.1, 7);
  prepareFortunes(src.string(), o2.string(), 0.1, 7);
  EXPECT_NE(m1.find("2 files, 201 cookies"), std::string::npos) << m1;
  auto t1 = readTokenFile((o1 / "train.tok").string()), t2 = readTokenFile((o2 / "train.tok").string());
  auto v1 = readTokenFile((o1 / "val.tok").string());
  EXPECT_EQ(t1.tokens, t2.tokens);
  EXPECT_GT(v1.tokens.size(), 0u);
  EXPECT_LT(v1.tokens.size(), t1.tokens.size() / 3);
  std::string text = ByteTokenizer::decode(std::vector<int>(t1.tokens.begin(), t1.tokens.end()));
  EXPECT_EQ(text.find("binary index"), std::string::npos);
  EXPECT_EQ(text.rfind("last one\n%\n"), text.size() - 11);
  // A different split seed gives a different split.
  fs::path o3 = tempDir("o3");
  prepareFortunes(src.string(), o3.string(), 0.1, 8);
  EXPECT_NE(readTokenFile((o3 / "val.tok").string()).tokens, v1.tokens);
  for (auto& d : {src, o1, o2, o3}) fs::remove_all(d);
}

TEST(Sampler, SeededWindowsWithShiftedTargets) {
  auto data = testing::syntheticCorpus(5000);
  BatchSampler a(&data, 9), b(&data, 9), c(&data, 10);
  std::vector<int> ta(3 * 8), ya(3 * 8), tb(3 * 8), yb(3 * 8), tc(3 * 8), yc(3 * 8);
  for (int i = 0; i < 5; i++) {
    a.next(3, 8, ta.data(), ya.data());
    b.next(3, 8, tb.data(), yb.data());
    c.next(3, 8, tc.data(), yc.data());
    EXPECT_EQ(ta, tb);
    EXPECT_EQ(ya, yb);
  }
  EXPECT_NE(ta, tc);
  for (int r = 0; r < 3; r++)
    for (int t = 0; t + 1 < 8; t++) EXPECT_EQ(ya[r * 8 + t], ta[r * 8 + t + 1]);
  EXPECT_EQ(a.batchesDrawn, 5u);
}

}  // namespace
}  // namespace weft::train
