#include "train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

namespace weft::train {

namespace fs = std::filesystem;

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

Trainer::Trainer(const TrainOptions& opt, const std::vector<uint16_t>* train,
                 const std::vector<uint16_t>* val)
    : opt_(opt), val_(val), sampler_(train, opt.seed * 0x9E3779B97F4A7C15ull + 1) {
  if (opt.seq > opt.model.maxSeq) throw std::invalid_argument("--seq exceeds the model context");
  model_ = makeGPT2(opt.model, opt.dtype);
  auto init = gpt2InitParams(opt.model, opt.seed);
  model_->setParams(init.data());
  model_->setDropout(opt.dropout);
  size_t microbatches = 1;
  if (opt.pp.stages > 1) {
    if (!opt.comm) throw std::invalid_argument("--pp needs a launcher's ranks");
    if (opt.gradAccum != 1) throw std::invalid_argument("--pp: --microbatches sets the micro-batches per step, not --grad-accum");
    pp_ = std::make_unique<Pipeline>(opt.comm, *model_, opt.adam, opt.pp, opt.batch, opt.seq);
    microbatches = size_t(pp_->schedule().microbatches);
  } else {
    dp_ = std::make_unique<DataParallel>(opt.comm, *model_, opt.adam, opt.dp);
  }
  scaler_.enabled = opt.dtype == DType::f16;
  tokens_.resize(microbatches * opt.batch * opt.seq);
  targets_.resize(tokens_.size());
}

void Trainer::materialize() {
  if (pp_) pp_->materialize();
  else dp_->materialize();
}

void Trainer::setState(const void* rawParams, const std::vector<float>& master, const std::vector<float>& m,
                       const std::vector<float>& v) {
  if (pp_) {
    pp_->setParams(rawParams);
    pp_->loadState(master, m, v);
  } else {
    dp_->setParams(rawParams);
    dp_->loadState(master, m, v);
  }
}

StepStats Trainer::pipelineStep() {
  StepStats s;
  s.lr = schedule().at(step_);
  s.lossScale = scaler_.current();
  const int M = pp_->schedule().microbatches, D = pp_->replicas(), d = pp_->replica();
  const size_t n = size_t(opt_.batch) * opt_.seq;
  // The micro-batches of one rank with --grad-accum D x M, with the same dropout
  // masks: replica d trains those with index j = d mod D, as data parallelism does.
  for (int j = 0; j < D * M; j++) {
    if (j % D != d) {
      sampler_.skip(opt_.batch, opt_.seq);
      continue;
    }
    sampler_.next(opt_.batch, opt_.seq, tokens_.data() + size_t(j / D) * n, targets_.data() + size_t(j / D) * n);
  }
  const uint64_t stepSeed = opt_.seed ^ (uint64_t(step_) << 20);
  Pipeline::StepResult r = pp_->step(
      tokens_.data(), targets_.data(), [&](int i) { return Rng(stepSeed ^ uint64_t(i * D + d)).next(); }, s.lr,
      s.lossScale);
  s.computeSeconds = r.busySeconds;
  s.commSeconds = r.idleSeconds;
  s.optimizerSeconds = r.optimizerSeconds;
  s.loss = r.lossSum / (M * D);
  s.bubble = r.bubble;
  s.simulatedBubble = pp_->simulatedBubble();
  s.peakActivationBytes = r.peakActivationBytes;
  s.workBufferBytes = r.workBufferBytes;
  return finishStep(s, r.optim);
}

LrSchedule Trainer::schedule() const {
  LrSchedule s;
  s.maxLr = opt_.lr;
  s.minLr = opt_.minLr;
  s.warmupSteps = opt_.warmup;
  s.totalSteps = opt_.steps;
  return s;
}

StepStats Trainer::trainStep() {
  if (pp_) return pipelineStep();
  StepStats s;
  s.lr = schedule().at(step_);
  s.lossScale = scaler_.current();
  model_->zeroGrad();
  const int N = dp_->size(), K = opt_.gradAccum;
  double lossSum = 0;
  const auto t0 = std::chrono::steady_clock::now();
  // Every rank draws the whole global batch and trains micro-batches i = rank mod N.
  for (int i = 0; i < N * K; i++) {
    if (i % N != dp_->rank()) {
      sampler_.skip(opt_.batch, opt_.seq);
      continue;
    }
    sampler_.next(opt_.batch, opt_.seq, tokens_.data(), targets_.data());
    // Fresh dropout masks per micro-batch, a function of (seed, step, i): resumable.
    model_->setDropoutSeed(Rng(opt_.seed ^ (uint64_t(step_) << 20) ^ uint64_t(i)).next());
    const double f0 = now();
    lossSum += model_->forward(tokens_.data(), targets_.data(), opt_.batch, opt_.seq);
    dp_->tracePassEnd();
    const double f1 = now();
    dp_->traceSpan(0, "forward, micro-batch " + std::to_string(i), f0, f1);
    dp_->beforeBackward(i / N == K - 1);  // DDP: only the last micro-batch communicates
    model_->backward(s.lossScale / (N * K));
    dp_->tracePassEnd();
    dp_->traceSpan(0, "backward, micro-batch " + std::to_string(i), f1, now());
  }
  s.computeSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  DataParallel::StepResult r = dp_->step(s.lr, s.lossScale, lossSum);
  s.commSeconds = r.waitSeconds;
  s.optimizerSeconds = r.optimizerSeconds;
  s.loss = r.lossSum / (N * K);
  return finishStep(s, r.optim);
}

StepStats Trainer::finishStep(StepStats s, const OptimStepResult& o) {
  scaler_.update(o.skipped);
  s.gradNorm = o.gradNorm;
  s.skipped = o.skipped;
  s.step = ++step_;
  return s;
}

namespace {
// Evaluation mode (no dropout) for the lifetime of the guard.
struct EvalMode {
  Model& m;
  explicit EvalMode(Model& model) : m(model) { m.setTraining(false); }
  ~EvalMode() { m.setTraining(true); }
};

// Every parameter in the model for the lifetime of the guard (ZeRO-3 gathers them:
// collective unless already materialized by the caller; a pipeline's stages share
// theirs, collective).
struct Materialized {
  DataParallel* dp = nullptr;
  Pipeline* pp = nullptr;
  bool was;
  explicit Materialized(DataParallel& d) : dp(&d), was(d.materialized()) { d.materialize(); }
  explicit Materialized(Pipeline& p) : pp(&p), was(p.materialized()) { p.materialize(); }
  ~Materialized() {
    if (was) return;
    if (dp) dp->release();
    if (pp) pp->release();
  }
};
}  // namespace

double Trainer::evalLoss() {
  EvalMode eval(*model_);
  std::optional<Materialized> whole;
  if (dp_) whole.emplace(*dp_);
  else whole.emplace(*pp_);
  BatchSampler vs(val_, opt_.seed ^ 0x5EED5EED5EEDull);
  double sum = 0;
  for (int i = 0; i < opt_.evalBatches; i++) {
    vs.next(opt_.batch, opt_.seq, tokens_.data(), targets_.data());
    sum += model_->forward(tokens_.data(), targets_.data(), opt_.batch, opt_.seq);
  }
  return sum / opt_.evalBatches;
}

std::string Trainer::generate(const std::string& prompt, int numTokens, double temperature,
                              uint64_t seed) {
  EvalMode eval(*model_);
  // A pipeline's stages shared their parameters before (materialize()): only rank 0 samples.
  if (pp_ && !pp_->materialized())
    throw std::logic_error("generate under pipeline parallelism: call materialize() on every rank first");
  std::optional<Materialized> whole;
  if (dp_) whole.emplace(*dp_);
  Rng rng(seed);
  std::vector<int> ctx;
  for (uint16_t t : ByteTokenizer::encode(prompt)) ctx.push_back(t);
  if (ctx.empty()) ctx.push_back('\n');
  const int V = opt_.model.vocabSize, maxT = opt_.model.maxSeq;
  std::vector<float> logits(V);
  std::vector<int> out;
  for (int i = 0; i < numTokens; i++) {
    const int T = std::min<int>(int(ctx.size()), maxT);
    const int* window = ctx.data() + ctx.size() - T;
    model_->forward(window, nullptr, 1, T);
    model_->logitsRow(0, T - 1, logits.data());
    double mx = -INFINITY;
    for (float l : logits) mx = std::max(mx, double(l));
    std::vector<double> p(V);
    double sum = 0;
    for (int v = 0; v < V; v++) sum += p[v] = std::exp((logits[v] - mx) / std::max(temperature, 1e-6));
    double u = rng.uniform() * sum;
    int pick = V - 1;
    for (int v = 0; v < V; v++) {
      if ((u -= p[v]) <= 0) { pick = v; break; }
    }
    ctx.push_back(pick);
    out.push_back(pick);
  }
  return ByteTokenizer::decode(out);
}

// ---- checkpoints ----------------------------------------------------------------

namespace {

constexpr char kCkptMagic[8] = {'W', 'E', 'F', 'T', 'C', 'K', 'P', 'T'};
constexpr uint32_t kCkptVersion = 1;

struct Writer {
  std::string buf;
  void raw(const void* p, size_t n) { buf.append(static_cast<const char*>(p), n); }
  template <class U> void put(U v) { raw(&v, sizeof v); }  // host order (x86-64: LE)
};

struct Reader {
  const std::string& buf;
  size_t pos = 0;
  std::string path;
  void raw(void* p, size_t n) {
    if (pos + n > buf.size()) throw std::runtime_error(path + ": truncated checkpoint");
    std::memcpy(p, buf.data() + pos, n);
    pos += n;
  }
  template <class U> U get() {
    U v;
    raw(&v, sizeof v);
    return v;
  }
};

}  // namespace

void Trainer::save(const std::string& dir) const {
  Writer w;
  w.raw(kCkptMagic, 8);
  w.put<uint32_t>(kCkptVersion);
  const GPT2Config& c = opt_.model;
  for (int v : {c.vocabSize, c.maxSeq, c.numLayers, c.numHeads, c.channels}) w.put<int32_t>(v);
  w.put<uint32_t>(uint32_t(opt_.dtype));
  w.put<int64_t>(step_);
  w.put<int64_t>(const_cast<Trainer*>(this)->optimizer().t);
  w.put<uint8_t>(scaler_.enabled);
  w.put<double>(scaler_.scale);
  w.put<int32_t>(scaler_.goodSteps);
  BatchSampler& smp = const_cast<BatchSampler&>(sampler_);
  for (uint64_t s : smp.rng().s) w.put<uint64_t>(s);
  w.put<uint64_t>(smp.batchesDrawn);
  const size_t n = model_->numParams();
  w.put<uint64_t>(n);
  std::vector<char> params;
  std::vector<float> master, m, v;
  int rank = 0;
  if (pp_) {
    Materialized whole(*pp_);
    params.assign(static_cast<const char*>(model_->paramData()),
                  static_cast<const char*>(model_->paramData()) + n * dtypeSize(opt_.dtype));
    pp_->fullState(&master, &m, &v);
    rank = pp_->replica() * pp_->stages() + pp_->stage();
  } else {
    dp_->fullParams(&params);
    dp_->fullState(&master, &m, &v);
    rank = dp_->rank();
  }
  w.raw(params.data(), params.size());
  w.raw(master.data(), n * 4);
  w.raw(m.data(), n * 4);
  w.raw(v.data(), n * 4);
  if (rank != 0) return;

  fs::create_directories(dir);
  const fs::path path = fs::path(dir) / "checkpoint.bin";
  const fs::path tmp = fs::path(dir) / "checkpoint.bin.tmp";
  // Write, flush to the disk, then rename over the old file: a crash at any point
  // leaves either the previous checkpoint or the new one, never a torn file.
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + tmp.string());
  const bool ok = std::fwrite(w.buf.data(), 1, w.buf.size(), f) == w.buf.size() && std::fflush(f) == 0 &&
                  fsync(fileno(f)) == 0;
  if (std::fclose(f) != 0 || !ok) throw std::runtime_error("cannot write " + tmp.string());
  fs::rename(tmp, path);
}

void Trainer::load(const std::string& dir) {
  const fs::path path = fs::path(dir) / "checkpoint.bin";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::string buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Reader r{buf, 0, path.string()};
  char magic[8];
  r.raw(magic, 8);
  if (std::memcmp(magic, kCkptMagic, 8) != 0) throw std::runtime_error(r.path + ": not a weft checkpoint");
  if (r.get<uint32_t>() != kCkptVersion) throw std::runtime_error(r.path + ": unsupported version");
  const GPT2Config& c = opt_.model;
  for (int v : {c.vocabSize, c.maxSeq, c.numLayers, c.numHeads, c.channels})
    if (r.get<int32_t>() != v) throw std::runtime_error(r.path + ": model config differs from this run's");
  const auto dt = DType(r.get<uint32_t>());
  if (dt != opt_.dtype)
    throw std::runtime_error(r.path + ": checkpoint dtype " + dtypeName(dt) + " differs from --dtype " +
                             dtypeName(opt_.dtype));
  step_ = int(r.get<int64_t>());
  optimizer().t = r.get<int64_t>();
  scaler_.enabled = r.get<uint8_t>() != 0;
  scaler_.scale = r.get<double>();
  scaler_.goodSteps = r.get<int32_t>();
  for (uint64_t& s : sampler_.rng().s) s = r.get<uint64_t>();
  sampler_.batchesDrawn = r.get<uint64_t>();
  const size_t n = model_->numParams();
  if (r.get<uint64_t>() != n) throw std::runtime_error(r.path + ": parameter count differs");
  std::vector<char> params(n * dtypeSize(opt_.dtype));
  r.raw(params.data(), params.size());
  std::vector<float> master(n), m(n), v(n);
  r.raw(master.data(), n * 4);
  r.raw(m.data(), n * 4);
  r.raw(v.data(), n * 4);
  if (r.pos != buf.size()) throw std::runtime_error(r.path + ": trailing bytes");
  setState(params.data(), master, m, v);
}

}  // namespace weft::train
