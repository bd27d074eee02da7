#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"
#include "train/hf.h"
#include "base/json.h"

namespace fs = std::filesystem;

namespace weft::train {
namespace {

TEST(HF, ExportImportRoundTrip) {
  GPT2Config cfg{256, 16, 2, 2, 32};
  auto m = makeGPT2(cfg, DType::f32);
  auto p = gpt2InitParams(cfg, 5);
  m->setParams(p.data());
  const fs::path dir = fs::temp_directory_path() / ("weft-train-hf-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  exportHF(dir.string(), *m);

  // config.json carries GPT2Config's fields under HF's names.
  std::ifstream cf(dir / "config.json");
  std::string ctext((std::istreambuf_iterator<char>(cf)), std::istreambuf_iterator<char>());
  auto cj = json::parse(ctext);
  EXPECT_EQ(cj.find("model_type")->str, "gpt2");
  EXPECT_EQ(cj.find("activation_function")->str, "gelu_new");
  EXPECT_EQ(int(cj.find("n_embd")->num), 32);
  EXPECT_EQ(int(cj.find("n_positions")->num), 16);

  // safetensors header: 8-byte length, JSON, 8-byte aligned data, HF names and [in,out] shapes.
  std::ifstream sf(dir / "model.safetensors", std::ios::binary);
  std::string st((std::istreambuf_iterator<char>(sf)), std::istreambuf_iterator<char>());
  uint64_t hlen = 0;
  for (int i = 0; i < 8; i++) hlen |= uint64_t(uint8_t(st[i])) << (8 * i);
  EXPECT_EQ(hlen % 8, 0u);
  auto h = json::parse(std::string_view(st).substr(8, hlen));
  const auto* attn = h.find("transformer.h.1.attn.c_attn.weight");
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(attn->find("dtype")->str, "F32");
  EXPECT_EQ(int(attn->find("shape")->arr[0].num), 32);
  EXPECT_EQ(int(attn->find("shape")->arr[1].num), 96);
  EXPECT_EQ(h.find("lm_head.weight"), nullptr);
  EXPECT_EQ(st.size(), 8 + hlen + 4 * m->numParams());

  HFModel back = importHF(dir.string());
  EXPECT_EQ(back.config.channels, 32);
  EXPECT_EQ(back.config.numLayers, 2);
  std::vector<float> orig(m->numParams());
  m->getParams(orig.data());
  EXPECT_EQ(back.params, orig);
  fs::remove_all(dir);
}

TEST(Json, ParsesWhatHFWrites) {
  auto v = json::parse(R"({"a": [1, 2.5e-3, -4], "b": {"c": "x\"y\u00e9"}, "d": null, "e": true})");
  EXPECT_DOUBLE_EQ(v.find("a")->arr[1].num, 2.5e-3);
  EXPECT_EQ(v.find("b")->find("c")->str, "x\"y\xc3\xa9");
  EXPECT_EQ(v.find("d")->kind, json::Value::Null);
  EXPECT_TRUE(v.find("e")->b);
  EXPECT_THROW(json::parse("{\"a\": }"), std::runtime_error);
  EXPECT_THROW(json::parse("[1, 2"), std::runtime_error);
}

}  // namespace
}  // namespace weft::train

#include "train/plot.h"

namespace weft::train {
namespace {

TEST(Plot, WritesAValidPng) {
  const fs::path p = fs::temp_directory_path() / ("weft-train-plot-" + std::to_string(::getpid()) + ".png");
  Curve tr{{1, 5.5}, {2, 4.0}, {3, 3.1}}, va{{0, 5.6}, {3, 3.2}};
  writeLossPlot(p.string(), tr, va, 200, 120);
  std::ifstream f(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GT(s.size(), 200u * 120u);
  EXPECT_EQ(s.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(s.substr(12, 4), "IHDR");
  EXPECT_EQ(s.substr(s.size() - 8, 4), "IEND");
  fs::remove(p);
}

}  // namespace
}  // namespace weft::train
