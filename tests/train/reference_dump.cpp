// Helper for torch_reference.py: trains a small model briefly on the synthetic corpus,
// exports it in HF format, re-imports it in fp32, bf16 and fp16, and writes our
// logits and loss on fixed tokens for each, for comparison with GPT2LMHeadModel.
//
//   reference_dump OUTDIR
// writes OUTDIR/hf/{config.json,model.safetensors}, OUTDIR/tokens.bin (int32 B*T
// inputs then B*T targets), OUTDIR/logits-<dtype>.bin (float32 [B,T,V]) and
// OUTDIR/summary.json ({"B":..,"T":..,"V":..,"loss":{"fp32":..}}).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"
#include "train/hf.h"

using namespace weft::train;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: reference_dump OUTDIR\n");
    return 2;
  }
  const fs::path out = argv[1];
  fs::create_directories(out);
  auto data = testing::syntheticCorpus(40000);
  TrainOptions opt = testing::tinyOptions(DType::f32);
  opt.model = {256, 32, 2, 4, 64};
  opt.seq = 32;
  opt.steps = 30;
  Trainer tr(opt, &data, &data);
  for (int i = 0; i < opt.steps; i++) tr.trainStep();
  exportHF((out / "hf").string(), tr.model());

  const int B = 3, T = 32, V = opt.model.vocabSize;
  std::vector<int> tok(B * T), tgt(B * T);
  BatchSampler smp(&data, 99);
  smp.next(B, T, tok.data(), tgt.data());
  {
    std::ofstream f(out / "tokens.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(tok.data()), std::streamsize(tok.size() * 4));
    f.write(reinterpret_cast<const char*>(tgt.data()), std::streamsize(tgt.size() * 4));
  }
  HFModel hf = importHF((out / "hf").string());
  std::string losses;
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    auto m = makeGPT2(hf.config, dt);
    m->setParams(hf.params.data());
    const double loss = m->forward(tok.data(), tgt.data(), B, T);
    std::vector<float> logits(size_t(B) * T * V);
    for (int b = 0; b < B; b++)
      for (int t = 0; t < T; t++) m->logitsRow(b, t, logits.data() + (size_t(b) * T + t) * V);
    std::ofstream f(out / (std::string("logits-") + dtypeName(dt) + ".bin"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(logits.data()), std::streamsize(logits.size() * 4));
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s\"%s\": %.17g", losses.empty() ? "" : ", ", dtypeName(dt), loss);
    losses += buf;
  }
  std::ofstream(out / "summary.json") << "{\"B\": " << B << ", \"T\": " << T << ", \"V\": " << V
                                      << ", \"loss\": {" << losses << "}}\n";
  std::printf("reference_dump: wrote %s\n", out.string().c_str());
  return 0;
}
