#include "train/dist/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>

#include "weft/weft.hpp"

namespace weft::train {

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Forward FLOPs per token of one block, of the embeddings and of the final
// LayerNorm with the head (backward is twice the forward for each).
double blockCost(const GPT2Config& c, int seq) { return 24.0 * c.channels * c.channels + 4.0 * seq * c.channels; }
double headCost(const GPT2Config& c) { return 2.0 * c.vocabSize * c.channels + 10.0 * c.channels; }
double embedCost(const GPT2Config& c) { return 2.0 * c.channels; }

}  // namespace

std::vector<std::pair<int, int>> balanceStages(const GPT2Config& cfg, int seq, int parts) {
  const int L = cfg.numLayers;
  if (parts < 1) throw std::invalid_argument("pipeline: no stages");
  // cost[k][i]: the smallest largest part when the first i blocks form k parts.
  // Part costs: its blocks, plus the embeddings (first part) and the head (last).
  const double inf = std::numeric_limits<double>::infinity();
  auto partCost = [&](int k, int first, int end) {
    double c = blockCost(cfg, seq) * (end - first);
    if (k == 0) c += embedCost(cfg);
    if (k == parts - 1) c += headCost(cfg);
    return c;
  };
  // With fewer blocks than parts some parts are empty; otherwise every part gets one.
  const int minBlocks = L >= parts ? 1 : 0;
  std::vector<std::vector<double>> best(size_t(parts + 1), std::vector<double>(size_t(L + 1), inf));
  std::vector<std::vector<int>> from(size_t(parts + 1), std::vector<int>(size_t(L + 1), -1));
  best[0][0] = 0;
  for (int k = 0; k < parts; k++)
    for (int i = 0; i <= L; i++) {
      if (best[size_t(k)][size_t(i)] == inf) continue;
      for (int j = i + minBlocks; j <= L; j++) {
        const double c = std::max(best[size_t(k)][size_t(i)], partCost(k, i, j));
        if (c < best[size_t(k + 1)][size_t(j)]) {
          best[size_t(k + 1)][size_t(j)] = c;
          from[size_t(k + 1)][size_t(j)] = i;
        }
      }
    }
  std::vector<std::pair<int, int>> split(static_cast<size_t>(parts));
  for (int k = parts, end = L; k > 0; k--) {
    const int first = from[size_t(k)][size_t(end)];
    split[size_t(k - 1)] = {first, end};
    end = first;
  }
  return split;
}

std::vector<std::pair<int, int>> parseStages(const std::string& spec, int layers, int parts) {
  std::vector<std::pair<int, int>> split;
  size_t pos = 0;
  int next = 0;
  while (pos <= spec.size()) {
    const size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, comma - pos);
    int a = -1, b = -1;
    char extra = 0;
    if (std::sscanf(item.c_str(), "%d-%d%c", &a, &b, &extra) != 2 &&
        (std::sscanf(item.c_str(), "%d%c", &a, &extra) != 1 || (b = a) < 0))
      throw std::invalid_argument("--stages: '" + item + "' is not a block range like 2-5");
    if (a != next || b < a)
      throw std::invalid_argument("--stages: '" + item + "' must start at block " + std::to_string(next) +
                                  " (ranges in order, contiguous)");
    split.emplace_back(a, b + 1);
    next = b + 1;
    pos = comma + 1;
  }
  if (next != layers)
    throw std::invalid_argument("--stages must cover blocks 0-" + std::to_string(layers - 1) + ", ends at " +
                                std::to_string(next - 1));
  if (int(split.size()) != parts)
    throw std::invalid_argument("--stages names " + std::to_string(split.size()) + " stages, the run has " +
                                std::to_string(parts) + " (ranks x chunks)");
  return split;
}

pp::Schedule buildSchedule(const PipelineOptions& opt) {
  const int P = opt.stages, M = opt.microbatches > 0 ? opt.microbatches : opt.stages;
  if (opt.chunks != 1 && opt.schedule != "interleaved")
    throw std::invalid_argument("--chunks is for --schedule interleaved");
  if (opt.schedule == "gpipe") return pp::gpipe(P, M);
  if (opt.schedule == "1f1b") return pp::one_f_one_b(P, M);
  if (opt.schedule == "zb") return pp::zero_bubble_h1(P, M);
  if (opt.schedule == "interleaved") {
    if (M % P != 0)
      throw std::invalid_argument("--schedule interleaved needs --microbatches a multiple of the stages (" +
                                  std::to_string(P) + ")");
    return pp::interleaved(P, M, opt.chunks);
  }
  throw std::invalid_argument("--schedule must be gpipe, 1f1b, interleaved or zb");
}

// Receive and send buffers of one step, per (micro-batch, chunk).
struct Pipeline::Buffers {
  std::map<std::pair<int, int>, std::vector<char>> actIn, actOut, gradIn, gradOut;
  std::map<std::pair<int, int>, weftRequest_t> actRecv, gradRecv;
  std::vector<weftRequest_t> sends;
  ~Buffers() {
    for (auto* reqs : {&actRecv, &gradRecv})
      for (auto& [key, r] : *reqs) weftWait(&r);  // an error path: the buffers must outlive the requests
    for (weftRequest_t& r : sends) weftWait(&r);
  }
};

namespace {
std::vector<Segment> ownedSegments(const Model& model, const std::vector<ModelPart>& parts) {
  std::vector<Segment> owned;
  auto add = [&](int unit) {
    int first = 0, end = 0;
    model.unitTensors(unit, &first, &end);
    const auto& t = model.tensors();
    const size_t off = t[size_t(first)].offset, stop = t[size_t(end - 1)].offset + t[size_t(end - 1)].numel;
    if (!owned.empty() && owned.back().offset + owned.back().count == off) owned.back().count += stop - off;
    else owned.push_back({off, stop - off});
  };
  // In the flat buffer's order: the embeddings (unit 0), blocks, ln_f.
  bool embed = false, head = false;
  for (const ModelPart& p : parts) embed |= p.embed, head |= p.head;
  if (embed || head) add(0);  // the head holds the tied token embedding (and wpe, unused)
  std::vector<int> blocks;
  for (const ModelPart& p : parts)
    for (int l = p.firstBlock; l < p.endBlock; l++) blocks.push_back(l);
  std::sort(blocks.begin(), blocks.end());
  for (int l : blocks) {
    add(Model::attentionUnit(l));
    add(Model::mlpUnit(l));
  }
  if (head) add(model.numUnits() - 1);
  return owned;
}
}  // namespace

Pipeline::Pipeline(weftComm_t world, Model& model, const AdamWConfig& adam, const PipelineOptions& opt, int batch,
                   int seq)
    : world_(world),
      D_(opt.replicas),
      replica_(commRank(world) / std::max(1, opt.stages)),
      pipe_([&] {
        if (opt.stages < 1 || opt.replicas < 1 || opt.stages * opt.replicas != commSize(world))
          throw std::invalid_argument("--pp " + std::to_string(opt.stages) + " x --dp " +
                                      std::to_string(opt.replicas) + " needs as many ranks, the job has " +
                                      std::to_string(commSize(world)));
        weftComm_t c = nullptr;
        weft::check(weftCommSplit(world, replica_, commRank(world), &c, nullptr), world);
        return c;
      }()),
      dp_([&] {
        weftComm_t c = nullptr;
        if (opt.replicas > 1)
          weft::check(weftCommSplit(world, commRank(world) % opt.stages, replica_, &c, nullptr), world);
        return c;
      }()),
      model_(model),
      rank_(commRank(pipe_)),
      P_(commSize(pipe_)),
      batch_(batch),
      seq_(seq),
      sched_(buildSchedule(opt)),
      split_(opt.split.empty() ? balanceStages(model.config(), seq, P_ * sched_.chunks)
                               : parseStages(opt.split, model.config().numLayers, P_ * sched_.chunks)),
      parts_([&] {
        std::vector<ModelPart> parts;
        const int V = P_ * sched_.chunks;
        for (int c = 0; c < sched_.chunks; c++) {
          const int vs = c * P_ + rank_;
          parts.push_back({split_[size_t(vs)].first, split_[size_t(vs)].second, vs == 0, vs == V - 1});
        }
        return parts;
      }()),
      adam_(model, adam, ownedSegments(model, parts_)) {
  const std::string err = pp::run(sched_).error;
  if (!err.empty()) throw std::logic_error("pipeline schedule " + sched_.name + " is invalid: " + err);
  int wf = 0, we = 0;
  model.unitTensors(0, &wf, &we);
  wteCount_ = model.tensors()[size_t(wf)].numel;  // transformer.wte.weight comes first
  // The stage's parameters and gradients move into compact buffers; the whole
  // model's flat ones are freed.
  const size_t es = dtypeSize(model.dtype());
  compactAt_.assign(model.tensors().size(), SIZE_MAX);
  size_t at = 0;
  for (const Segment& seg : adam_.owned()) {
    for (size_t t = 0; t < model.tensors().size(); t++) {
      const ParamTensor& pt = model.tensors()[t];
      if (pt.offset >= seg.offset && pt.offset < seg.offset + seg.count) compactAt_[t] = at + pt.offset - seg.offset;
    }
    at += seg.count;
  }
  stageParams_.resize(adam_.numOwned() * es);
  stageGrads_.assign(adam_.numOwned() * es, 0);
  convertFromFloat(model.dtype(), adam_.master.data(), stageParams_.data(), adam_.numOwned());
  model.setFlatParams(false);
  model.setFlatGrads(false);
  pointTensors();
  // Activations and their gradients on communicators of their own: receives from
  // one peer match its sends in order, per communicator.
  weft::check(weftCommSplit(pipe_, 0, rank_, &acts_, nullptr), pipe_);
  weft::check(weftCommSplit(pipe_, 0, rank_, &grads_, nullptr), pipe_);
  const bool first = rank_ == 0, last = rank_ == P_ - 1;
  if (P_ > 1) {
    weft::check(weftCommSplit(pipe_, first || last ? 0 : WEFT_SPLIT_NOCOLOR, rank_, &tied_, nullptr), pipe_);
    countsWte_ = !last;  // the norm counts the tied embedding once, on the first stage
  }
}

Pipeline::~Pipeline() {
  for (weftComm_t c : {tied_, grads_, acts_, dp_, pipe_})
    if (c) weftCommDestroy(c);
}

Pipeline::StepResult Pipeline::step(const int* tokens, const int* targets,
                                    const std::function<uint64_t(int)>& dropoutSeed, double lr, double gradScale) {
  StepResult r;
  const int M = sched_.microbatches, V = P_ * sched_.chunks;
  const size_t N = size_t(batch_) * seq_, C = size_t(model_.config().channels);
  const size_t es = dtypeSize(model_.dtype()), actBytes = N * C * es;
  const weftDataType_t wt = weftType(model_.dtype());
  const std::vector<pp::Action>& mine = sched_.actions[size_t(rank_)];
  auto rankOf = [&](int vs) { return vs % P_; };
  if (materialized_) release();
  std::fill(stageGrads_.begin(), stageGrads_.end(), 0);  // the stage's gradients (the model's flat buffer is gone)
  model_.releaseSlot(Model::kWholeModelSlot);  // an evaluation's activations: not this step's
  actions_.clear();
  Buffers buf;
  // Every receive of the step, in list order: each kind comes from one peer.
  for (const pp::Action& a : mine) {
    const int vs = a.chunk * P_ + rank_;
    const std::pair<int, int> key{a.mb, a.chunk};
    if (a.op == pp::Op::RecvAct) {
      auto& b = buf.actIn[key];
      b.resize(actBytes);
      weft::check(weftRecvAsync(b.data(), N * C, wt, rankOf(vs - 1), acts_, &buf.actRecv[key]), acts_);
    } else if (a.op == pp::Op::RecvGrad) {
      auto& b = buf.gradIn[key];
      b.resize(actBytes);
      weft::check(weftRecvAsync(b.data(), N * C, wt, rankOf(vs + 1), grads_, &buf.gradRecv[key]), grads_);
    }
  }
  auto await = [&](std::map<std::pair<int, int>, weftRequest_t>& reqs, const std::pair<int, int>& key,
                   weftComm_t comm) {
    auto it = reqs.find(key);
    if (it == reqs.end() || it->second == nullptr) return;
    const double t0 = now();
    weft::check(weftWait(&it->second), comm);
    const double t1 = now();
    r.idleSeconds += t1 - t0;
    if (t1 - t0 > 1e-5) actions_.push_back({"wait", 1, t0, t1});
  };
  const double scale = gradScale / (double(M) * D_);
  double lossSum = 0;
  std::vector<double> opSeconds(4, 0.0), opCounts(4, 0.0);  // F, B, I, W
  auto busy = [&](const char* tag, const pp::Action& a, int kind, double t0) {
    const double t1 = now();
    r.busySeconds += t1 - t0;
    opSeconds[size_t(kind)] += t1 - t0;
    opCounts[size_t(kind)] += 1;
    std::string name = tag + std::to_string(a.mb);
    if (sched_.chunks > 1) name += ".c" + std::to_string(a.chunk);
    actions_.push_back({name, 0, t0, t1});
    r.peakActivationBytes = std::max(r.peakActivationBytes, model_.savedActivationBytes());
  };
  const double start = now();
  for (const pp::Action& a : mine) {
    const int vs = a.chunk * P_ + rank_;
    const ModelPart& part = parts_[size_t(a.chunk)];
    const int slot = a.mb * sched_.chunks + a.chunk;
    const std::pair<int, int> key{a.mb, a.chunk};
    const size_t at = size_t(a.mb) * N;
    switch (a.op) {
      case pp::Op::Forward: {
        await(buf.actRecv, key, acts_);
        std::vector<char>& out = buf.actOut[key];
        if (vs != V - 1) out.resize(actBytes);
        model_.setDropoutSeed(dropoutSeed(a.mb));
        const double t0 = now();
        const double loss = model_.forwardPart(part, slot, tokens + at, part.head ? targets + at : nullptr,
                                               part.embed ? nullptr : buf.actIn[key].data(), out.data(), batch_,
                                               seq_);
        if (part.head) lossSum += loss;
        buf.actIn.erase(key);
        busy("F", a, 0, t0);
        break;
      }
      case pp::Op::Backward:
      case pp::Op::InputGrad: {
        await(buf.gradRecv, key, grads_);
        std::vector<char>& dIn = buf.gradOut[key];
        if (vs != 0) dIn.resize(actBytes);
        const bool split = a.op == pp::Op::InputGrad;
        const double t0 = now();
        model_.backwardPart(part, slot, split ? BackwardPiece::input : BackwardPiece::all, scale,
                            part.head ? nullptr : buf.gradIn[key].data(), dIn.data());
        buf.gradIn.erase(key);
        busy(split ? "I" : "B", a, split ? 2 : 1, t0);
        break;
      }
      case pp::Op::WeightGrad: {
        const double t0 = now();
        model_.backwardPart(part, slot, BackwardPiece::weight, scale, nullptr, nullptr);
        busy("W", a, 3, t0);
        break;
      }
      case pp::Op::SendAct:
        buf.sends.emplace_back();
        weft::check(weftSendAsync(buf.actOut[key].data(), N * C, wt, rankOf(vs + 1), acts_, &buf.sends.back()),
                    acts_);
        break;
      case pp::Op::SendGrad:
        buf.sends.emplace_back();
        weft::check(weftSendAsync(buf.gradOut[key].data(), N * C, wt, rankOf(vs - 1), grads_, &buf.sends.back()),
                    grads_);
        break;
      case pp::Op::RecvAct:
      case pp::Op::RecvGrad:
        break;  // posted at the start
    }
  }
  for (weftRequest_t& s : buf.sends) weft::check(weftWait(&s), pipe_);
  const double end = now();
  r.workBufferBytes = model_.activationBytes() - model_.savedActivationBytes();

  // The tied embedding: the first and the last stage sum their gradients.
  if (tied_) {
    char* g = static_cast<char*>(model_.tensorGrads(0));
    weft::check(weftAllReduce(g, g, wteCount_, wt, weftSum, tied_, nullptr), tied_);
  }
  // Data parallelism across the replicas: each stage's gradients summed over its copies.
  if (dp_) weft::check(weftAllReduce(stageGrads_.data(), stageGrads_.data(), adam_.numOwned(), wt, weftSum, dp_, nullptr), dp_);

  // Unscale, norm (each element once over all stages), Inf/NaN, the loss, timings.
  const double o0 = now();
  grad32_.resize(adam_.numOwned());
  convertToFloat(model_.dtype(), stageGrads_.data(), grad32_.data(), adam_.numOwned());
  const float inv = float(1.0 / gradScale);
  double sumsq = 0;
  // The owned elements start with the tied embedding on a stage that holds it.
  const bool holdsWte = parts_.front().embed || parts_.back().head;
  const size_t skip = holdsWte && !countsWte_ ? wteCount_ : 0;
  for (size_t i = 0; i < grad32_.size(); i++) {
    grad32_[i] *= inv;
    if (i >= skip) sumsq += double(grad32_[i]) * grad32_[i];
  }
  // One sum over every rank: loss, norm (the replicas' norms are equal, each
  // counted D times), Inf/NaN, busy time, then seconds and counts per action kind
  // for the simulation.
  double stats[12] = {lossSum, sumsq / D_, std::isfinite(sumsq) ? 0.0 : 1.0, r.busySeconds};
  for (int k = 0; k < 4; k++) stats[4 + k] = opSeconds[size_t(k)], stats[8 + k] = opCounts[size_t(k)];
  weft::check(weftAllReduce(stats, stats, 12, weftFloat64, weftSum, world_, nullptr), world_);
  const double* costs = stats + 4;
  double span[2] = {-start, end};
  weft::check(weftAllReduce(span, span, 2, weftFloat64, weftMax, world_, nullptr), world_);
  r.lossSum = stats[0];
  r.pipelineSeconds = span[1] + span[0];
  r.bubble = r.pipelineSeconds > 0 ? 1 - stats[3] / (P_ * D_ * r.pipelineSeconds) : 0;
  {
    // Costs of one action on a whole stage: a chunk's measured time x chunks.
    pp::Costs c;
    auto mean = [&](int k) { return costs[4 + k] > 0 ? costs[k] / costs[4 + k] * sched_.chunks : 0.0; };
    c.forward = mean(0);
    c.backward = mean(1);
    c.input_grad = mean(2);
    c.weight_grad = mean(3);
    simulated_ = pp::run(sched_, c).bubble();
  }
  r.optim.gradNorm = std::sqrt(stats[1]);
  r.optim.skipped = stats[2] != 0 || !std::isfinite(stats[1]);
  if (!r.optim.skipped) {
    adam_.update(grad32_.data(), lr, adam_.clipFactor(r.optim.gradNorm));
    convertFromFloat(model_.dtype(), adam_.master.data(), stageParams_.data(), adam_.numOwned());
  }
  r.optimizerSeconds = now() - o0;
  return r;
}

int Pipeline::ownerOfUnit(int unit) const {
  const int block = model_.unitBlock(unit);
  if (unit == 0) return 0;
  if (block < 0) return P_ - 1;  // ln_f
  for (size_t vs = 0; vs < split_.size(); vs++)
    if (block >= split_[vs].first && block < split_[vs].second) return int(vs) % P_;
  throw std::logic_error("pipeline: no stage holds unit " + std::to_string(unit));
}

void Pipeline::shareUnits(void* full, size_t es, weftDataType_t type) const {
  for (int u = 0; u < model_.numUnits(); u++) {
    int first = 0, end = 0;
    model_.unitTensors(u, &first, &end);
    const auto& t = model_.tensors();
    const size_t off = t[size_t(first)].offset, n = t[size_t(end - 1)].offset + t[size_t(end - 1)].numel - off;
    char* p = static_cast<char*>(full) + off * es;
    weft::check(weftBroadcast(p, p, n, type, ownerOfUnit(u), pipe_, nullptr), pipe_);
  }
}

void Pipeline::fullState(std::vector<float>* master, std::vector<float>* m, std::vector<float>* v) const {
  const size_t n = model_.numParams();
  for (auto [owned, full] : {std::pair{&adam_.master, master}, {&adam_.m, m}, {&adam_.v, v}}) {
    full->assign(n, 0.0f);
    adam_.scatterOwned(owned->data(), full->data());
    shareUnits(full->data(), 4, weftFloat32);
  }
}

void Pipeline::loadState(const std::vector<float>& master, const std::vector<float>& m,
                         const std::vector<float>& v) {
  adam_.loadFull(model_, master, m, v);
}

void Pipeline::pointTensors() {
  const size_t es = dtypeSize(model_.dtype());
  for (size_t t = 0; t < compactAt_.size(); t++) {
    const bool mine = compactAt_[t] != SIZE_MAX;
    model_.setTensorParams(int(t), mine ? stageParams_.data() + compactAt_[t] * es : nullptr);
    model_.setTensorGrads(int(t), mine ? stageGrads_.data() + compactAt_[t] * es : nullptr);
  }
}

void Pipeline::materialize() {
  if (!materialized_) {
    model_.setFlatParams(true);  // every tensor's parameters now point into the flat buffer
    const size_t es = dtypeSize(model_.dtype());
    const char* src = stageParams_.data();
    for (const Segment& seg : adam_.owned()) {
      std::memcpy(static_cast<char*>(model_.paramData()) + seg.offset * es, src, seg.count * es);
      src += seg.count * es;
    }
    materialized_ = true;
  }
  shareUnits(model_.paramData(), dtypeSize(model_.dtype()), weftType(model_.dtype()));
}

void Pipeline::release() {
  model_.setFlatParams(false);
  pointTensors();
  materialized_ = false;
}

void Pipeline::setParams(const void* raw) {
  const size_t es = dtypeSize(model_.dtype());
  char* dst = stageParams_.data();
  for (const Segment& seg : adam_.owned()) {
    std::memcpy(dst, static_cast<const char*>(raw) + seg.offset * es, seg.count * es);
    dst += seg.count * es;
  }
  if (materialized_) std::memcpy(model_.paramData(), raw, model_.numParams() * es);
}

MemoryReport Pipeline::memory() const {
  MemoryReport r;
  const size_t es = dtypeSize(model_.dtype());
  r.params = stageParams_.size() + (materialized_ ? model_.numParams() * es : 0);
  r.grads = stageGrads_.size();
  r.optimizer = adam_.numOwned() * 3 * sizeof(float);
  r.fp32Grads = adam_.numOwned() * sizeof(float);
  return r;
}

}  // namespace weft::train
