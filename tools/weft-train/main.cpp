// weft-train: single-process GPT-2 training on the Debian fortunes corpus.
//
//   weft-train --preset tiny|small [--dtype fp32|bf16|fp16] [--steps N] [--batch B --seq T]
//              [--grad-accum K] [--out DIR] [--resume DIR] [--export-hf DIR] ...
//   weft-train --prepare-data [--src /usr/share/games/fortunes] [--data DIR]
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "train/data.h"
#include "train/hf.h"
#include "train/matmul.h"
#include "train/plot.h"
#include "train/trainer.h"

#ifndef WEFT_TRAIN_DATA_DIR
#define WEFT_TRAIN_DATA_DIR "weft-train-data"
#endif

namespace fs = std::filesystem;
using namespace weft::train;

namespace {

const char* kUsage =
    "usage: weft-train --preset tiny|small [options]\n"
    "       weft-train --prepare-data [--src DIR] [--data DIR]\n"
    "\n"
    "model and run:\n"
    "  --preset tiny|small     tiny: 4 layers, 4 heads, width 128, context 64, batch 12\n"
    "                          small: 6 layers, 6 heads, width 384, context 256, batch 8\n"
    "  --dtype fp32|bf16|fp16  storage precision (fp32 accumulation; fp16 uses loss scaling)\n"
    "  --steps N               optimizer steps (tiny 300, small 2000)\n"
    "  --batch B --seq T       micro-batch size and sequence length (T <= context)\n"
    "  --grad-accum K          micro-batches per optimizer step (1)\n"
    "  --checkpoint-activations  recompute each block's activations in backward (less memory)\n"
    "  --lr X --min-lr X       peak and final learning rate (tiny 2e-3, small 1e-3; 1e-4)\n"
    "  --warmup N              linear warmup steps (10% of --steps)\n"
    "  --dropout P             dropout on embeddings, attention, residual branches (0)\n"
    "  --weight-decay X        AdamW decoupled weight decay on 2-D weights (0.1)\n"
    "  --grad-clip X           global-norm clip, 0 = off (1.0)\n"
    "  --loss-scale X          fp16 initial loss scale (65536, GradScaler's default)\n"
    "  --seed S                init, sampling and generation seed (1337)\n"
    "output:\n"
    "  --out DIR               checkpoint, metrics.csv, sample.txt (weft-train-<preset>-<dtype>)\n"
    "  --resume DIR            continue from DIR/checkpoint.bin (same preset, dtype, --steps)\n"
    "  --export-hf DIR         write config.json + model.safetensors for GPT2LMHeadModel\n"
    "  --init-hf DIR           start from HF weights (config.json must match the preset)\n"
    "  --eval-every N          validation loss every N steps (tiny 50, small 200; 0 = end only)\n"
    "  --eval-batches N        validation batches per evaluation (8)\n"
    "  --save-every N          also checkpoint every N steps (0 = end only)\n"
    "  --log-every N           plain log line every N steps when not on a terminal (10)\n"
    "  --sample N              generate N bytes at the end (200; 0 = none)\n"
    "data:\n"
    "  --data DIR              directory with train.tok / val.tok (built from the Debian\n"
    "                          fortunes package on first use; default " WEFT_TRAIN_DATA_DIR ")\n"
    "  --prepare-data          only (re)build the token files; --src DIR picks the corpus\n";

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "weft-train: %s\n", msg.c_str());
  std::exit(2);
}

std::string fmtTime(double s) {
  if (!std::isfinite(s) || s < 0) s = 0;
  char b[32];
  int t = int(s + 0.5);
  if (t >= 3600) std::snprintf(b, sizeof b, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(b, sizeof b, "%d:%02d", t / 60, t % 60);
  return b;
}

std::string fmtRate(double r) {
  char b[32];
  if (r >= 1e6) std::snprintf(b, sizeof b, "%.2fM", r / 1e6);
  else if (r >= 1e3) std::snprintf(b, sizeof b, "%.1fk", r / 1e3);
  else std::snprintf(b, sizeof b, "%.0f", r);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenMP threads that spin between parallel regions lose badly when the cores are
  // shared (2-core machine under load: 1.9k tok/s spinning vs 7.4k passive on tiny).
  // libgomp reads the policy at load time, so set it and re-execute once unless the
  // user chose one.
  // OPENBLAS_CORETYPE is read at load time too (see blasCoretypeOverride).
  if (!std::getenv("WEFT_TRAIN_NO_REEXEC")) {
    bool reexec = false;
    if (!std::getenv("OMP_WAIT_POLICY")) {
      setenv("OMP_WAIT_POLICY", "passive", 1);
      reexec = true;
    }
    std::string why;
    if (const char* core = weft::train::blasCoretypeOverride(&why)) {
      std::fprintf(stderr, "weft-train: %s (OPENBLAS_CORETYPE=%s; set it yourself to choose)\n", why.c_str(),
                   core);
      setenv("OPENBLAS_CORETYPE", core, 1);
      reexec = true;
    }
    if (reexec) {
      setenv("WEFT_TRAIN_NO_REEXEC", "1", 1);
      execv("/proc/self/exe", argv);  // on failure, just continue as we are
    }
  }
  std::string preset, dtypeStr = "fp32", out, resume, exportDir, initHF, dataDir = WEFT_TRAIN_DATA_DIR,
                      srcDir = kFortuneDir;
  int steps = -1, batch = -1, seq = -1, accum = 1, warmup = -1, evalEvery = -1, evalBatches = 8,
      saveEvery = 0, logEvery = 10, sampleLen = 200;
  double lr = -1, minLr = 1e-4, wd = 0.1, clip = 1.0;
  uint64_t seed = 1337;
  double lossScale = 65536.0, dropout = 0.0;
  bool prepareOnly = false, ckptActs = false;

  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    auto num = [&]() -> double {
      std::string v = val();
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (!end || *end) die("bad number for " + a + ": " + v);
      return d;
    };
    if (a == "-h" || a == "--help") { std::fputs(kUsage, stdout); return 0; }
    else if (a == "--preset") preset = val();
    else if (a == "--dtype") dtypeStr = val();
    else if (a == "--steps") steps = int(num());
    else if (a == "--batch") batch = int(num());
    else if (a == "--seq") seq = int(num());
    else if (a == "--grad-accum") accum = int(num());
    else if (a == "--lr") lr = num();
    else if (a == "--min-lr") minLr = num();
    else if (a == "--warmup") warmup = int(num());
    else if (a == "--weight-decay") wd = num();
    else if (a == "--grad-clip") clip = num();
    else if (a == "--seed") seed = uint64_t(num());
    else if (a == "--loss-scale") lossScale = num();
    else if (a == "--dropout") dropout = num();
    else if (a == "--out") out = val();
    else if (a == "--resume") resume = val();
    else if (a == "--export-hf") exportDir = val();
    else if (a == "--init-hf") initHF = val();
    else if (a == "--eval-every") evalEvery = int(num());
    else if (a == "--eval-batches") evalBatches = int(num());
    else if (a == "--save-every") saveEvery = int(num());
    else if (a == "--log-every") logEvery = std::max(1, int(num()));
    else if (a == "--sample") sampleLen = int(num());
    else if (a == "--data") dataDir = val();
    else if (a == "--src") srcDir = val();
    else if (a == "--prepare-data") prepareOnly = true;
    else if (a == "--checkpoint-activations") ckptActs = true;
    else die("unknown option " + a + " (see --help)");
  }

  try {
    const fs::path trainPath = fs::path(dataDir) / "train.tok", valPath = fs::path(dataDir) / "val.tok";
    if (prepareOnly) {
      std::printf("%s\n", prepareFortunes(srcDir, dataDir).c_str());
      return 0;
    }
    if (!fs::exists(trainPath) || !fs::exists(valPath)) {
      std::printf("data: building token files from %s\n", srcDir.c_str());
      std::printf("data: %s\n", prepareFortunes(srcDir, dataDir).c_str());
    }

    TrainOptions opt;
    if (preset == "tiny") {
      opt.model = {256, 64, 4, 4, 128};
      opt.batch = 12;
      opt.steps = 300;
      opt.lr = 2e-3;
      if (evalEvery < 0) evalEvery = 50;
    } else if (preset == "small") {
      opt.model = {256, 256, 6, 6, 384};
      opt.batch = 8;
      opt.steps = 2000;
      opt.lr = 1e-3;
      if (evalEvery < 0) evalEvery = 200;
    } else {
      die("--preset tiny|small is required (see --help)");
    }
    if (!parseDType(dtypeStr, &opt.dtype) || opt.dtype == DType::f64) die("--dtype must be fp32, bf16 or fp16");
    opt.seq = opt.model.maxSeq;
    if (steps > 0) opt.steps = steps;
    if (batch > 0) opt.batch = batch;
    if (seq > 0) opt.seq = seq;
    if (opt.seq > opt.model.maxSeq) die("--seq exceeds the preset's context " + std::to_string(opt.model.maxSeq));
    if (accum < 1) die("--grad-accum must be >= 1");
    opt.gradAccum = accum;
    if (lr > 0) opt.lr = lr;
    opt.minLr = minLr;
    opt.warmup = warmup >= 0 ? warmup : std::max(1, opt.steps / 10);
    opt.adam.weightDecay = wd;
    opt.adam.gradClip = clip;
    opt.seed = seed;
    if (dropout < 0 || dropout >= 1) die("--dropout must be in [0, 1)");
    opt.dropout = dropout;
    opt.evalBatches = evalBatches;
    if (out.empty()) out = resume.empty() ? "weft-train-" + preset + "-" + dtypeName(opt.dtype) : resume;

    TokenFile trainData = readTokenFile(trainPath.string());
    TokenFile valData = readTokenFile(valPath.string());
    if (int(trainData.vocabSize) > opt.model.vocabSize) die("token file vocabulary exceeds the model's");

    Trainer tr(opt, &trainData.tokens, &valData.tokens);
    tr.model().setActivationCheckpointing(ckptActs);
    tr.scaler().scale = lossScale;
    if (!initHF.empty()) {
      if (!resume.empty()) die("--init-hf and --resume exclude each other");
      HFModel hf = importHF(initHF);
      const GPT2Config& c = opt.model;
      if (hf.config.vocabSize != c.vocabSize || hf.config.maxSeq != c.maxSeq || hf.config.numLayers != c.numLayers ||
          hf.config.numHeads != c.numHeads || hf.config.channels != c.channels)
        die(initHF + ": model config differs from preset " + preset);
      tr.model().setParams(hf.params.data());
      tr.optimizer().master = hf.params;
      std::printf("initialized from HF weights in %s\n", initHF.c_str());
    }
    if (!resume.empty()) {
      tr.load(resume);
      std::printf("resumed from %s at step %d (loss scale %g)\n", resume.c_str(), tr.step(),
                  tr.scaler().current());
    }
    fs::create_directories(out);
    const fs::path csvPath = fs::path(out) / "metrics.csv";
    const bool csvAppend = !resume.empty() && fs::exists(csvPath);
    std::ofstream csv(csvPath, csvAppend ? std::ios::app : std::ios::trunc);
    if (!csvAppend) csv << "step,loss,val_loss,lr,grad_norm,loss_scale,skipped,tokens_per_s,elapsed_s\n";

    const long tokPerStep = long(opt.batch) * opt.seq * opt.gradAccum;
    std::printf("weft-train: preset %s, %s, %zu parameters (%d layers, %d heads, width %d, context %d)\n",
                preset.c_str(), dtypeName(opt.dtype), tr.model().numParams(), opt.model.numLayers,
                opt.model.numHeads, opt.model.channels, opt.model.maxSeq);
    std::printf("  batch %d x seq %d x accum %d = %ld tokens/step, %d steps, lr %g -> %g (warmup %d), "
                "data %zu train / %zu val tokens, out %s\n",
                opt.batch, opt.seq, opt.gradAccum, tokPerStep, opt.steps, opt.lr, opt.minLr, opt.warmup,
                trainData.tokens.size(), valData.tokens.size(), out.c_str());
    std::fflush(stdout);

    const bool tty = isatty(STDOUT_FILENO);
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    double trainSeconds = 0, emaRate = 0, lastVal = NAN, firstLoss = NAN, lastLoss = NAN;
    const int startStep = tr.step();
    if (startStep == 0) {
      lastVal = tr.evalLoss();
      std::printf("activations: %.1f MiB (%s)\n", double(tr.model().activationBytes()) / (1 << 20),
                  ckptActs ? "checkpointed per block" : "all kept");
      std::printf("step %d: val loss %.4f\n", 0, lastVal);
      csv << 0 << ",," << lastVal << ",,,,,,0\n";
    }
    while (tr.step() < opt.steps) {
      const auto s0 = clock::now();
      StepStats s = tr.trainStep();
      const double dt = std::chrono::duration<double>(clock::now() - s0).count();
      trainSeconds += dt;
      const double rate = tokPerStep / dt;
      emaRate = emaRate == 0 ? rate : 0.9 * emaRate + 0.1 * rate;
      if (std::isnan(firstLoss)) firstLoss = s.loss;
      lastLoss = s.loss;
      const double eta = (opt.steps - s.step) * tokPerStep / emaRate;
      const bool evalNow = s.step == opt.steps || (evalEvery > 0 && s.step % evalEvery == 0);
      double val = NAN;
      if (evalNow) val = lastVal = tr.evalLoss();
      const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
      csv << s.step << "," << s.loss << ",";
      if (evalNow) csv << val;
      csv << "," << s.lr << "," << s.gradNorm << "," << s.lossScale << "," << int(s.skipped) << "," << rate
          << "," << elapsed << "\n";

      char scaleInfo[96] = "";
      if (tr.scaler().enabled) {
        if (s.skipped)
          std::snprintf(scaleInfo, sizeof scaleInfo, " | scale %g SKIPPED (inf/nan grads), scale -> %g",
                        s.lossScale, tr.scaler().current());
        else
          std::snprintf(scaleInfo, sizeof scaleInfo, " | scale %g", s.lossScale);
      }
      if (tty) {
        const int width = 24;
        const int done = int(double(s.step) / opt.steps * width);
        std::string bar(size_t(done), '#');
        bar.append(size_t(width - done), '.');
        std::printf("\r[%s] %d/%d loss %.4f lr %.2e %s tok/s ETA %s%s\033[K", bar.c_str(), s.step, opt.steps,
                    s.loss, s.lr, fmtRate(emaRate).c_str(), fmtTime(eta).c_str(), scaleInfo);
        if (evalNow || s.skipped) std::printf("\n");
        if (evalNow) std::printf("step %d: val loss %.4f\n", s.step, val);
      } else if (s.step % logEvery == 0 || s.step == startStep + 1 || s.step == opt.steps || s.skipped ||
                 evalNow) {
        std::printf("step %5d/%d | loss %.4f | lr %.2e | grad norm %.3f | %s tok/s | ETA %s%s", s.step,
                    opt.steps, s.loss, s.lr, s.gradNorm, fmtRate(emaRate).c_str(), fmtTime(eta).c_str(),
                    scaleInfo);
        if (evalNow) std::printf(" | val loss %.4f", val);
        std::printf("\n");
      }
      std::fflush(stdout);
      if (saveEvery > 0 && s.step % saveEvery == 0 && s.step != opt.steps) tr.save(out);
    }
    csv.flush();
    tr.save(out);
    const double total = std::chrono::duration<double>(clock::now() - t0).count();
    const int ran = tr.step() - startStep;
    std::printf("done: %d steps in %.1f s (%.1f s training, %s tok/s); train loss %.4f -> %.4f; val loss %.4f\n",
                ran, total, trainSeconds, fmtRate(ran > 0 ? ran * tokPerStep / trainSeconds : 0).c_str(),
                firstLoss, lastLoss, lastVal);
    {
      csv.close();
      Curve trainCurve, valCurve;
      readMetricsCsv(csvPath.string(), &trainCurve, &valCurve);
      writeLossPlot((fs::path(out) / "loss.png").string(), trainCurve, valCurve);
    }
    std::printf("checkpoint: %s/checkpoint.bin, metrics: %s, plot: %s/loss.png\n", out.c_str(),
                csvPath.string().c_str(), out.c_str());
    if (!exportDir.empty()) {
      exportHF(exportDir, tr.model());
      std::printf("exported HF GPT2LMHeadModel to %s (config.json, model.safetensors)\n", exportDir.c_str());
    }
    if (sampleLen > 0) {
      std::string text = tr.generate("", sampleLen, 0.8, opt.seed);
      std::ofstream(fs::path(out) / "sample.txt") << text;
      std::printf("sample (temperature 0.8):\n%s\n", text.c_str());
    }
  } catch (const std::exception& e) {
    die(e.what());
  }
  return 0;
}
