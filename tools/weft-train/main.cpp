// weft-train: GPT-2 training on the Debian fortunes corpus, one process or
// data-parallel over weft when started by a launcher (weft-run, torchrun, mpirun,
// srun).
//
//   weft-train --preset tiny|small|gpt2 [--dtype fp32|bf16|fp16] [--steps N] [--batch B --seq T]
//              [--grad-accum K] [--out DIR] [--resume DIR] [--export-hf DIR] ...
//   weft-run -n N weft-train --preset small [--zero 0|1] [--bucket-mb MB] ...
//   weft-run -n P weft-train --preset small --pp P --microbatches M --schedule gpipe|1f1b|interleaved|zb
//   weft-train --prepare-data [--src /usr/share/games/fortunes] [--data DIR]
#include <omp.h>
#include <signal.h>
#include <sys/resource.h>
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
#include <thread>
#include <vector>

#include "train/data.h"
#include "train/dist/trace.h"
#include "train/hf.h"
#include "train/matmul.h"
#include "train/plot.h"
#include "train/trainer.h"
#include "weft/weft.hpp"

#ifndef WEFT_TRAIN_DATA_DIR
#define WEFT_TRAIN_DATA_DIR "weft-train-data"
#endif

namespace fs = std::filesystem;
using namespace weft::train;

namespace {

const char* kUsage =
    "usage: weft-train --preset tiny|small|gpt2 [options]\n"
    "       weft-run -n N weft-train --preset ... [options]   (data-parallel; also torchrun, mpirun, srun)\n"
    "       weft-train --prepare-data [--src DIR] [--data DIR]\n"
    "\n"
    "model and run:\n"
    "  --preset tiny|small|gpt2  tiny: 4 layers, 4 heads, width 128, context 64, batch 12\n"
    "                          small: 6 layers, 6 heads, width 384, context 256, batch 8\n"
    "                          gpt2: 12 layers, 12 heads, width 768, context 1024, batch 1\n"
    "                          (GPT-2 124M's shape with the byte vocabulary: 85.8M parameters)\n"
    "  --dtype fp32|bf16|fp16  storage precision (fp32 accumulation; fp16 uses loss scaling)\n"
    "  --steps N               optimizer steps (tiny 300, small 2000)\n"
    "  --batch B --seq T       micro-batch size and sequence length (T <= context)\n"
    "  --grad-accum K          micro-batches per rank per optimizer step (1); the global batch is\n"
    "                          ranks x K micro-batches, micro-batch i on rank i mod ranks, so\n"
    "                          N ranks x K trains on exactly the batches of 1 rank x N*K\n"
    "  --threads N             compute threads per rank (cores / ranks on this host)\n"
    "  --checkpoint-activations  recompute each block's activations in backward (less memory)\n"
    "  --lr X --min-lr X       peak and final learning rate (tiny 2e-3, small 1e-3; 1e-4)\n"
    "  --warmup N              linear warmup steps (10% of --steps)\n"
    "  --dropout P             dropout on embeddings, attention, residual branches (0)\n"
    "  --weight-decay X        AdamW decoupled weight decay on 2-D weights (0.1)\n"
    "  --grad-clip X           global-norm clip, 0 = off (1.0)\n"
    "  --loss-scale X          fp16 initial loss scale (65536, GradScaler's default)\n"
    "  --seed S                init, sampling and generation seed (1337)\n"
    "data parallelism (when a launcher started more than one rank):\n"
    "  --zero 0|1|2|3          0: DDP, gradients all-reduced in buckets during backward (default);\n"
    "                          1: ZeRO-1, optimizer state sharded, buckets reduce-scattered;\n"
    "                          2: also gradients (every micro-batch's buckets reduce-scattered);\n"
    "                          3: also parameters (each half block gathered for its forward and backward)\n"
    "  --bucket-mb MB          gradient bucket cap (25, as PyTorch; the first bucket 1 MiB; ZeRO-2:\n"
    "                          the largest, up to 25, at which 4 buckets fit in 2 x parameters / ranks bytes)\n"
    "  --reduce-dtype fp32     reduce 16-bit gradients in fp32 (default: in their own type)\n"
    "  --grad-compress bf16|fp16  send fp32 gradients as 16-bit and widen after\n"
    "  --powersgd R            PowerSGD rank-R compression of 2-D gradients with error feedback and\n"
    "                          warm start (DDP; PyTorch's powerSGD_hook semantics)\n"
    "  --powersgd-start S      plain all-reduce for the first S steps (10)\n"
    "  --powersgd-no-error-feedback  drop the compression error instead of carrying it over\n"
    "  --elastic               when a rank is lost the others shrink the communicator (weftCommShrink),\n"
    "                          reload the last checkpoint (--save-every) and go on with the same global\n"
    "                          batch through more --grad-accum: ranks x --grad-accum must divide by the\n"
    "                          ranks left (4 x 3 survives any loss); start with weft-run --elastic\n"
    "pipeline parallelism (instead of data parallelism):\n"
    "  --pp P                  P stages, one per rank (the job's ranks): the blocks cut into contiguous\n"
    "                          stages balanced by estimated compute, embeddings with the first, the\n"
    "                          final LayerNorm and tied head with the last\n"
    "  --microbatches M        micro-batches per step (P); a step trains on the batches of one rank\n"
    "                          with --grad-accum M\n"
    "  --schedule S            gpipe | 1f1b (default) | interleaved | zb (ZB-H1: weight gradients\n"
    "                          deferred into the bubble)\n"
    "  --chunks V              model chunks per rank for --schedule interleaved (2)\n"
    "  --stages 0-1,2-5        blocks of each (virtual) stage instead of the balanced cut\n"
    "  --dp D                  D data-parallel copies of the pipeline (ranks = P x D; rank r is stage\n"
    "                          r mod P of copy r / P): each stage's gradients all-reduced over its copies,\n"
    "                          copy d trains micro-batches j = d mod D of the D x M in a step\n"
    "  --plot-schedule FILE    PNG chart of the measured step (--trace-step): one row per stage, one box\n"
    "                          per action (F3, B3, I3, W3), idle time white\n"
    "  --verbose               every rank logs its steps, prefixed with its rank\n"
    "  --trace FILE            Chrome/Perfetto trace (JSON) of one step, every rank: each half block's\n"
    "                          forward and backward, each bucket's collective, waits, the optimizer\n"
    "  --trace-step S          the step traced (3, or the last if fewer)\n"
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

std::string gRankPrefix;  // "rank R: " when data-parallel

// SIGTERM (a launcher stopping the job because another rank died) ends the run
// after at most one more step rather than at once, so that a step failing on the
// dead peer still reports weft's error naming it.
volatile sig_atomic_t gTerminate = 0;
void onTerminate(int) { gTerminate = 1; }

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "weft-train: %s%s\n", gRankPrefix.c_str(), msg.c_str());
  std::exit(2);
}

// Started by a launcher: the variables weftCommInitFromEnv reads.
bool launched() {
  for (const char* v : {"WEFT_NRANKS", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"})
    if (std::getenv(v) && *std::getenv(v)) return true;
  return false;
}

// Ranks of this job on this host, from the launcher.
int localRanks() {
  for (const char* v : {"WEFT_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"})
    if (const char* s = std::getenv(v)) {
      const int n = std::atoi(s);
      if (n > 0) return n;
    }
  return 1;
}

double mib(size_t bytes) { return double(bytes) / (1 << 20); }

size_t peakRssBytes() {
  struct rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return size_t(ru.ru_maxrss) * 1024;
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

// --elastic: the survivors of a lost rank agree on who is gone (the bootstrap's
// news may trail the failed call a little), build a communicator of themselves
// and drop the broken one.
weftComm_t shrinkAfterLoss(weftComm_t comm, int world, const std::string& why) {
  std::vector<int> gone(size_t(world), -1);
  int n = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (weftCommGetFailedRanks(comm, gone.data(), world, &n) == weftSuccess && n == 0 &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (n == 0) die(why + "; --elastic: no rank is known to be gone (a hung rank or a cut link?), nothing to shrink");
  std::string names;
  for (int i = 0; i < n; i++) names += (i ? ", " : "") + std::to_string(gone[size_t(i)]);
  std::printf("%slost rank %s (%s); shrinking to %d ranks\n", gRankPrefix.c_str(), names.c_str(), why.c_str(),
              world - n);
  std::fflush(stdout);
  weftComm_t next = nullptr;
  if (weftCommShrink(comm, gone.data(), n, &next, nullptr) != weftSuccess)
    die(std::string("--elastic: ") + weftGetLastError(comm));
  weftCommAbort(comm);
  return next;
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
  bool prepareOnly = false, ckptActs = false, verbose = false, powerSgdFeedback = true, elastic = false;
  int threads = 0, zero = 0;
  double bucketMb = 0;  // 0: DataParallel's default for the stage
  std::string reduceDtype, gradCompress, traceFile;
  int traceStep = 3, powerSgd = 0, powerSgdStart = 10;
  int ppStages = 1, microbatches = 0, chunks = 0, ppReplicas = 1;
  std::string ppSchedule = "1f1b", ppSplit, plotSchedule;

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
    else if (a == "--threads") threads = int(num());
    else if (a == "--zero") zero = int(num());
    else if (a == "--bucket-mb") {
      bucketMb = num();
      if (!(bucketMb > 0)) die("--bucket-mb must be > 0");
    }
    else if (a == "--reduce-dtype") reduceDtype = val();
    else if (a == "--grad-compress") gradCompress = val();
    else if (a == "--verbose") verbose = true;
    else if (a == "--elastic") elastic = true;
    else if (a == "--trace") traceFile = val();
    else if (a == "--powersgd") powerSgd = int(num());
    else if (a == "--powersgd-start") powerSgdStart = int(num());
    else if (a == "--powersgd-no-error-feedback") powerSgdFeedback = false;
    else if (a == "--trace-step") traceStep = int(num());
    else if (a == "--pp") ppStages = int(num());
    else if (a == "--microbatches") microbatches = int(num());
    else if (a == "--schedule") ppSchedule = val();
    else if (a == "--chunks") chunks = int(num());
    else if (a == "--stages") ppSplit = val();
    else if (a == "--dp") ppReplicas = int(num());
    else if (a == "--plot-schedule") plotSchedule = val();
    else die("unknown option " + a + " (see --help)");
  }

  weftComm_t comm = nullptr;
  int rank = 0, world = 1;
  try {
    const fs::path trainPath = fs::path(dataDir) / "train.tok", valPath = fs::path(dataDir) / "val.tok";
    if (prepareOnly) {
      std::printf("%s\n", prepareFortunes(srcDir, dataDir).c_str());
      return 0;
    }
    if (launched()) {
      if (weftCommInitFromEnv(&comm, nullptr) != weftSuccess) die(std::string("weft: ") + weftGetLastError(nullptr));
      weftCommUserRank(comm, &rank);
      weftCommCount(comm, &world);
      if (world == 1) {
        weftCommDestroy(comm);
        comm = nullptr;
      } else {
        gRankPrefix = "rank " + std::to_string(rank) + ": ";
      }
    }
    bool lead = rank == 0;
    if (threads <= 0) threads = std::max(1, int(std::thread::hardware_concurrency()) / localRanks());
    omp_set_num_threads(threads);
    if (lead && (!fs::exists(trainPath) || !fs::exists(valPath))) {
      std::printf("data: building token files from %s\n", srcDir.c_str());
      std::printf("data: %s\n", prepareFortunes(srcDir, dataDir).c_str());
    }
    if (comm) weft::check(weftBarrier(comm), comm);  // the others read what rank 0 prepared

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
    } else if (preset == "gpt2") {
      opt.model = {ByteTokenizer::kVocab, 1024, 12, 12, 768};
      opt.batch = 1;
      opt.steps = 2000;
      opt.lr = 6e-4;
      if (evalEvery < 0) evalEvery = 200;
    } else {
      die("--preset tiny|small|gpt2 is required (see --help)");
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
    opt.comm = comm;
    if (zero < 0 || zero > 3) die("--zero must be 0, 1, 2 or 3");
    opt.dp.zero = zero;
    opt.dp.bucketMb = bucketMb;
    if (powerSgd < 0) die("--powersgd must be >= 1");
    if (powerSgd > 0 && zero != 0) die("--powersgd needs --zero 0");
    opt.dp.powerSgdRank = powerSgd;
    opt.dp.powerSgdStart = powerSgdStart;
    opt.dp.powerSgdErrorFeedback = powerSgdFeedback;
    if (!reduceDtype.empty() && !gradCompress.empty()) die("--reduce-dtype and --grad-compress exclude each other");
    if (!reduceDtype.empty()) {
      if (reduceDtype != "fp32") die("--reduce-dtype must be fp32");
      if (opt.dtype == DType::f32) die("--reduce-dtype fp32 is for 16-bit --dtype (fp32 gradients reduce in fp32)");
      opt.dp.commDtype = DType::f32;
    }
    if (!gradCompress.empty()) {
      DType c;
      if (!parseDType(gradCompress, &c) || (c != DType::bf16 && c != DType::f16))
        die("--grad-compress must be bf16 or fp16");
      if (opt.dtype != DType::f32) die("--grad-compress is for --dtype fp32 (16-bit gradients already travel as 16-bit)");
      opt.dp.commDtype = c;
    }
    if (ppStages < 1) die("--pp must be >= 1");
    if (!initHF.empty() && !resume.empty()) die("--init-hf and --resume exclude each other");
    if (elastic && (ppStages > 1 || !comm)) die("--elastic is for data-parallel runs under a launcher (not --pp)");
    const bool pipelined = ppStages > 1;
    if (!pipelined && (microbatches || chunks || !ppSplit.empty() || !plotSchedule.empty() || ppReplicas != 1))
      die("--microbatches, --chunks, --stages, --dp and --plot-schedule are for --pp");
    if (pipelined) {
      if (ppReplicas < 1 || ppStages * ppReplicas != world)
        die("--pp " + std::to_string(ppStages) + " --dp " + std::to_string(ppReplicas) + " needs " +
            std::to_string(ppStages * ppReplicas) + " ranks, the job has " + std::to_string(world));
      if (zero != 0 || powerSgd || !reduceDtype.empty() || !gradCompress.empty())
        die("--zero, --powersgd, --reduce-dtype and --grad-compress are data-parallel options, not for --pp");
      if (accum != 1) die("--pp: --microbatches sets the micro-batches per step, not --grad-accum");
      if (microbatches < 0) die("--microbatches must be >= 1");
      opt.pp.stages = ppStages;
      opt.pp.replicas = ppReplicas;
      opt.pp.schedule = ppSchedule;
      opt.pp.microbatches = microbatches > 0 ? microbatches : ppStages;
      opt.pp.chunks = chunks > 0 ? chunks : ppSchedule == "interleaved" ? 2 : 1;
      opt.pp.split = ppSplit;
    }
    if (out.empty()) out = resume.empty() ? "weft-train-" + preset + "-" + dtypeName(opt.dtype) : resume;

    TokenFile trainData = readTokenFile(trainPath.string());
    TokenFile valData = readTokenFile(valPath.string());
    if (int(trainData.vocabSize) > opt.model.vocabSize) die("token file vocabulary exceeds the model's");

    if (comm) {
      // Every rank must train the same run: compare what decides it (not --threads,
      // --verbose or the output paths) before the first collective of the trainer,
      // so a rank started with other options is named instead of failing later.
      char desc[512];
      std::snprintf(desc, sizeof desc, "%s %s %d %d %d %d %.17g %.17g %d %.17g %.17g %llu %.17g %.17g %d %d %.17g %s %s %d %d %d %d %d %d %s %d %s",
                    preset.c_str(), dtypeStr.c_str(), opt.steps, opt.batch, opt.seq, opt.gradAccum, opt.lr, opt.minLr,
                    opt.warmup, wd, clip, (unsigned long long)seed, lossScale, dropout, int(ckptActs), zero, bucketMb,
                    reduceDtype.c_str(), gradCompress.c_str(), powerSgd, powerSgdStart, int(powerSgdFeedback),
                    int(resume.empty()), ppStages * 100 + ppReplicas, opt.pp.microbatches, ppSchedule.c_str(),
                    opt.pp.chunks, ppSplit.c_str());
      uint64_t h = 1469598103934665603ull;  // FNV-1a
      for (const char* c = desc; *c; c++) h = (h ^ uint8_t(*c)) * 1099511628211ull;
      std::vector<uint64_t> all(size_t(world), 0);
      weft::check(weftAllGather(&h, all.data(), 1, weftUint64, comm, nullptr), comm);
      std::string differ;
      for (int r = 1; r < world; r++)
        if (all[size_t(r)] != all[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
      if (!differ.empty())
        die("the training options of rank(s) " + differ + " differ from rank 0's (every rank must be started with the "
            "same model, precision, batch, schedule, data-parallel and resume options)");
    }
    // Once; again for the survivors of a lost rank under --elastic, from the last checkpoint.
    const int globalMicro = world * opt.gradAccum;
    for (;;) try {
      Trainer tr(opt, &trainData.tokens, &valData.tokens);
      tr.model().setActivationCheckpointing(ckptActs);
      tr.scaler().scale = lossScale;
      // Lines every rank prints carry its rank when there are several.
      auto say = [&](const char* fmt, auto... args) {
        std::printf("%s", gRankPrefix.c_str());
        std::printf(fmt, args...);
      };
      if (!initHF.empty() && resume.empty()) {
        HFModel hf = importHF(initHF);
        const GPT2Config& c = opt.model;
        if (hf.config.vocabSize != c.vocabSize || hf.config.maxSeq != c.maxSeq || hf.config.numLayers != c.numLayers ||
            hf.config.numHeads != c.numHeads || hf.config.channels != c.channels)
          die(initHF + ": model config differs from preset " + preset);
        std::vector<char> raw(hf.params.size() * dtypeSize(opt.dtype));
        convertFromFloat(opt.dtype, hf.params.data(), raw.data(), hf.params.size());
        const std::vector<float> zeros(hf.params.size(), 0.0f);
        tr.setState(raw.data(), hf.params, zeros, zeros);
        if (lead) std::printf("initialized from HF weights in %s\n", initHF.c_str());
      }
      if (!resume.empty()) {
        tr.load(resume);
        if (lead)
          std::printf("resumed from %s at step %d (loss scale %g)\n", resume.c_str(), tr.step(), tr.scaler().current());
      }
      const fs::path csvPath = fs::path(out) / "metrics.csv";
      std::ofstream csv;
      if (lead) {
        fs::create_directories(out);
        const bool csvAppend = !resume.empty() && fs::exists(csvPath) && fs::file_size(csvPath) > 0;
        // A lead killed mid-write leaves a torn last line: the next rows start on a fresh one.
        bool torn = false;
        if (csvAppend) {
          std::ifstream tail(csvPath, std::ios::binary | std::ios::ate);
          tail.seekg(-1, std::ios::end);
          torn = tail.get() != '\n';
        }
        csv.open(csvPath, csvAppend ? std::ios::app : std::ios::trunc);
        if (torn) csv << "\n";
        if (!csvAppend)
          csv << "step,loss,val_loss,lr,grad_norm,loss_scale,skipped,tokens_per_s,elapsed_s,comm_bytes,"
                 "model_state_bytes,peak_rss_bytes,bubble,peak_activation_bytes\n";
      }

      Pipeline* pp = tr.pipeline();
      const long tokPerStep =
          long(opt.batch) * opt.seq * (pp ? pp->schedule().microbatches * pp->replicas() : opt.gradAccum * world);
      DataParallel* dp = pp ? nullptr : &tr.dataParallel();
      const char* zeroName[] = {"DDP", "ZeRO-1 (optimizer state sharded)", "ZeRO-2 (optimizer state and gradients sharded)",
                                "ZeRO-3 (optimizer state, gradients and parameters sharded; buckets are half blocks)"};
      if (lead) {
        std::printf("weft-train: preset %s, %s, %zu parameters (%d layers, %d heads, width %d, context %d)\n",
                    preset.c_str(), dtypeName(opt.dtype), tr.model().numParams(), opt.model.numLayers,
                    opt.model.numHeads, opt.model.channels, opt.model.maxSeq);
        if (pp)
          std::printf("  batch %d x seq %d x micro-batches %d x pipeline copies %d = %ld tokens/step, %d steps, "
                      "lr %g -> %g (warmup %d), data %zu train / %zu val tokens, out %s\n",
                      opt.batch, opt.seq, pp->schedule().microbatches, pp->replicas(), tokPerStep, opt.steps, opt.lr,
                      opt.minLr, opt.warmup, trainData.tokens.size(), valData.tokens.size(), out.c_str());
        else
          std::printf("  batch %d x seq %d x accum %d x ranks %d = %ld tokens/step, %d steps, lr %g -> %g (warmup %d), "
                      "data %zu train / %zu val tokens, out %s\n",
                      opt.batch, opt.seq, opt.gradAccum, world, tokPerStep, opt.steps, opt.lr, opt.minLr, opt.warmup,
                      trainData.tokens.size(), valData.tokens.size(), out.c_str());
        if (pp) {
          std::string cut;
          for (size_t v = 0; v < pp->split().size(); v++)
            cut += (v ? ", " : "") + std::to_string(v) + ": " + std::to_string(pp->split()[v].first) + "-" +
                   std::to_string(pp->split()[v].second - 1);
          std::printf("  pipeline: %d stages x %d chunks (x %d data-parallel copies), schedule %s, %d micro-batches; "
                      "blocks per virtual stage %s; bubble by formula %.3f\n",
                      pp->stages(), pp->schedule().chunks, pp->replicas(), pp->schedule().name.c_str(), pp->schedule().microbatches,
                      cut.c_str(), pp->formulaBubble());
        } else if (world > 1)
          std::printf("  data-parallel: %d ranks x %d threads, %s, %zu gradient buckets (cap %g MiB, first 1 MiB), "
                      "gradients reduced in %s%s\n",
                      world, threads, zeroName[zero], dp->buckets().size(), dp->bucketCapMb(),
                      dtypeName(opt.dp.commDtype.value_or(opt.dtype)),
                      powerSgd ? (", PowerSGD rank " + std::to_string(powerSgd) + " from step " +
                                  std::to_string(powerSgdStart)).c_str() : "");
      }
      size_t modelState = 0;
      auto reportMemory = [&](const char* when) {
        const MemoryReport mem = pp ? pp->memory() : dp->memory();
        modelState = mem.params + mem.grads + mem.optimizer;
        if (lead || world > 1)
          say("memory %s: parameters %.1f MiB, gradients %.1f MiB, optimizer %.1f MiB (fp32 master and moments%s): "
              "model state %.1f MiB; fp32 gradient %.1f MiB, communication buffers %.1f MiB, peak resident %.1f MiB\n",
              when, mib(mem.params), mib(mem.grads), mib(mem.optimizer),
              zero ? ", this rank's shard" : pp ? ", this stage's parameters" : "",
              mib(modelState), mib(mem.fp32Grads), mib(mem.commBuffers), mib(peakRssBytes()));
        std::fflush(stdout);
      };
      reportMemory("at start");
      std::fflush(stdout);

      const bool tty = lead && isatty(STDOUT_FILENO);
      using clock = std::chrono::steady_clock;
      const auto t0 = clock::now();
      double trainSeconds = 0, emaRate = 0, lastVal = NAN, firstLoss = NAN, lastLoss = NAN;
      double computeSum = 0, commSum = 0, optimSum = 0, timedSum = 0;  // steps after the first
      const int startStep = tr.step();
      // Under ZeRO-3 evaluation gathers the parameters: every rank takes part.
      // So does a pipeline: the stages share their parameters for it.
      const bool evaluates = lead || zero == 3 || pp;
      double bubbleSum = 0, simulatedSum = 0;
      size_t peakActivations = 0, workBuffers = 0;
      if (startStep == 0 && evaluates) lastVal = tr.evalLoss();
      if (startStep == 0 && lead) {
        std::printf("activations: %.1f MiB (%s)\n", double(tr.model().activationBytes()) / (1 << 20),
                    ckptActs ? "checkpointed per block" : "all kept");
        std::printf("step %d: val loss %.4f\n", 0, lastVal);
        csv << 0 << ",," << lastVal << ",,,,,,0,,,\n";
      }
      bool lastStep = false;
      struct sigaction sa{};
      sa.sa_handler = onTerminate;
      sigaction(SIGTERM, &sa, nullptr);
      while (tr.step() < opt.steps) {
        if (gTerminate) {
          // One more step after the signal: if a peer died, its first collective fails
          // naming it (a barrier here could meet a peer already inside the step).
          if (comm && !lastStep) lastStep = true;
          else die("terminated (SIGTERM) after step " + std::to_string(tr.step()));
        }
        const bool traceNow =
            (!traceFile.empty() || !plotSchedule.empty()) && tr.step() + 1 == std::min(traceStep, opt.steps);
        if (traceNow && dp) dp->traceOn();
        const auto s0 = clock::now();
        StepStats s = tr.trainStep();
        if (traceNow && !traceFile.empty()) {
          if (dp) dp->traceOff();
          if (dp) writeChromeTrace(comm, dp->traceEvents(), traceFile);
          else writeChromeTrace(comm, pp->lastActions(), traceFile, {"compute", "waiting on receives"});
          if (lead) std::printf("trace of step %d: %s (chrome://tracing or ui.perfetto.dev)\n", s.step, traceFile.c_str());
        }
        if (traceNow && !plotSchedule.empty()) {
          std::vector<std::vector<ScheduleBox>> rows;
          for (const auto& events : gatherTraceEvents(comm, pp->lastActions())) {
            rows.emplace_back();
            for (const TraceEvent& e : events)
              if (e.track == 0) rows.back().push_back({e.name, e.begin, e.end});
          }
          if (lead) {
            writeSchedulePlot(plotSchedule, rows);
            std::printf("schedule of step %d as measured: %s\n", s.step, plotSchedule.c_str());
          }
        }
        const double dt = std::chrono::duration<double>(clock::now() - s0).count();
        trainSeconds += dt;
        // Communication buffers and ZeRO-2/3 pools are allocated during the first step.
        if (s.step == startStep + 1 && world > 1) reportMemory("after the first step");
        const double rate = tokPerStep / dt;
        emaRate = emaRate == 0 ? rate : 0.9 * emaRate + 0.1 * rate;
        if (!std::isnan(firstLoss)) {
          computeSum += s.computeSeconds;
          bubbleSum += s.bubble;
          simulatedSum += s.simulatedBubble;
          commSum += s.commSeconds;
          optimSum += s.optimizerSeconds;
          timedSum += dt;
        }
        peakActivations = std::max(peakActivations, s.peakActivationBytes);
        workBuffers = std::max(workBuffers, s.workBufferBytes);
        if (std::isnan(firstLoss)) firstLoss = s.loss;
        lastLoss = s.loss;
        const double eta = (opt.steps - s.step) * tokPerStep / emaRate;
        const bool logNow = s.step % logEvery == 0 || s.step == startStep + 1 || s.step == opt.steps || s.skipped;
        if (verbose && pp && logNow) {
          say("step %d | loss %.4f | grad norm %.3f | %.2f s | busy %.0f ms, waiting on receives %.0f ms | "
              "bubble %.3f (simulated %.3f) | peak activations %.1f MiB\n",
              s.step, s.loss, s.gradNorm, dt, s.computeSeconds * 1e3, s.commSeconds * 1e3, s.bubble,
              s.simulatedBubble, mib(s.peakActivationBytes));
          std::fflush(stdout);
        } else if (verbose && world > 1 && logNow) {
          const CommVolume v = dp->volume();
          say("step %d | loss %.4f | grad norm %.3f | %.2f s | sent to weft %.1f MiB gradients, %.1f MiB parameters\n",
              s.step, s.loss, s.gradNorm, dt, mib(v.gradientBytes), mib(v.paramBytes));
          std::fflush(stdout);
        }
        const bool evalNow = s.step == opt.steps || (evalEvery > 0 && s.step % evalEvery == 0);
        double val = NAN;
        if (evalNow && evaluates) val = lastVal = tr.evalLoss();
        if (!lead) {
          if (saveEvery > 0 && s.step % saveEvery == 0 && s.step != opt.steps) tr.save(out);
          continue;
        }
        const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
        const CommVolume v = dp ? dp->volume() : CommVolume{};
        csv << s.step << "," << s.loss << ",";
        if (evalNow) csv << val;
        csv << "," << s.lr << "," << s.gradNorm << "," << s.lossScale << "," << int(s.skipped) << "," << rate
            << "," << elapsed << "," << (v.gradientBytes + v.paramBytes + v.statsBytes) << "," << modelState << ","
            << peakRssBytes() << ",";
        if (pp) csv << s.bubble;
        csv << "," << (pp ? s.peakActivationBytes : tr.model().activationBytes()) << "\n";
        csv.flush();  // a lead that dies loses no row it reported

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
        } else if (logNow || evalNow) {
          std::printf("step %5d/%d | loss %.4f | lr %.2e | grad norm %.3f | %s tok/s | ETA %s%s", s.step,
                      opt.steps, s.loss, s.lr, s.gradNorm, fmtRate(emaRate).c_str(), fmtTime(eta).c_str(),
                      scaleInfo);
          if (pp) std::printf(" | bubble %.3f", s.bubble);
          if (evalNow) std::printf(" | val loss %.4f", val);
          std::printf("\n");
        }
        std::fflush(stdout);
        if (saveEvery > 0 && s.step % saveEvery == 0 && s.step != opt.steps) tr.save(out);
      }
      tr.save(out);
      tr.materialize();  // ZeRO-3, pipeline: the whole model on every rank for sampling and export
      if (pp && (lead || verbose))
        say("pipeline stage %d: peak activations %.1f MiB (saved by the micro-batches in flight on this stage), "
            "backward work buffers %.1f MiB\n",
            pp->stage(), mib(peakActivations), mib(workBuffers));
      if (lead) {
        csv.flush();
        const double total = std::chrono::duration<double>(clock::now() - t0).count();
        const int ran = tr.step() - startStep;
        std::printf("done: %d steps in %.1f s (%.1f s training, %s tok/s); train loss %.4f -> %.4f; val loss %.4f\n",
                    ran, total, trainSeconds, fmtRate(ran > 0 ? ran * tokPerStep / trainSeconds : 0).c_str(),
                    firstLoss, lastLoss, lastVal);
        if (ran > 1) {
          const double n = ran - 1;
          std::printf("time per step (after the first): %.1f ms = compute %.1f ms + exposed communication %.1f ms "
                      "(%.1f%%) + optimizer %.1f ms\n",
                      timedSum / n * 1e3, computeSum / n * 1e3, commSum / n * 1e3, 100 * commSum / timedSum,
                      optimSum / n * 1e3);
          if (pp)
            std::printf("pipeline bubble (after the first step): measured %.3f, simulated with the measured action "
                        "times %.3f, formula %.3f\n",
                        bubbleSum / n, simulatedSum / n, pp->formulaBubble());
        }
        csv.close();
        Curve trainCurve, valCurve;
        readMetricsCsv(csvPath.string(), &trainCurve, &valCurve);
        writeLossPlot((fs::path(out) / "loss.png").string(), trainCurve, valCurve);
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
      }
      break;
    } catch (const weft::Error& e) {
      if (!elastic || !comm) throw;
      comm = shrinkAfterLoss(comm, world, e.what());
      weftCommUserRank(comm, &rank);
      weftCommCount(comm, &world);
      lead = rank == 0;
      gRankPrefix = "rank " + std::to_string(rank) + ": ";
      if (globalMicro % world != 0)
        die(std::to_string(globalMicro) + " micro-batches per step do not divide among " + std::to_string(world) +
            " ranks: choose ranks x --grad-accum divisible by every count of survivors (12 for 4 ranks)");
      opt.comm = comm;
      opt.gradAccum = globalMicro / world;
      resume = fs::exists(fs::path(out) / "checkpoint.bin") ? out : "";
      if (lead)
        std::printf("elastic: going on with %d ranks x --grad-accum %d (the same %d micro-batches per step) from %s\n",
                    world, opt.gradAccum, globalMicro, resume.empty() ? "the start (no checkpoint yet)" : "the last checkpoint");
      std::fflush(stdout);
    }
    if (comm) weftCommDestroy(comm);
  } catch (const std::exception& e) {
    die(e.what());
  }
  return 0;
}
