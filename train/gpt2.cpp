#include "train/gpt2.h"

#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <utility>

#include "train/attention.h"
#include "train/layernorm.h"
#include "train/loss.h"
#include "train/matmul.h"
#include "train/mlp.h"
#include "train/ops.h"
#include "train/rng.h"

namespace weft::train {

// ---- layout and init --------------------------------------------------------

namespace {
// Per-layer tensor slots, in HF order.
enum Slot {
  kLn1W, kLn1B, kAttnW, kAttnB, kAprojW, kAprojB, kLn2W, kLn2B, kFcW, kFcB, kMprojW, kMprojB,
  kSlots
};
constexpr int kWte = 0, kWpe = 1, kFirstLayer = 2;
}  // namespace

std::vector<ParamTensor> gpt2ParamLayout(const GPT2Config& c) {
  const int64_t V = c.vocabSize, P = c.maxSeq, C = c.channels;
  std::vector<ParamTensor> t;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    ParamTensor p;
    p.name = std::move(name);
    p.shape = std::move(shape);
    p.numel = 1;
    for (auto d : p.shape) p.numel *= size_t(d);
    p.offset = t.empty() ? 0 : t.back().offset + t.back().numel;
    p.decay = p.shape.size() == 2;
    t.push_back(std::move(p));
  };
  add("transformer.wte.weight", {V, C});
  add("transformer.wpe.weight", {P, C});
  for (int l = 0; l < c.numLayers; l++) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    add(h + "ln_1.weight", {C});
    add(h + "ln_1.bias", {C});
    add(h + "attn.c_attn.weight", {C, 3 * C});
    add(h + "attn.c_attn.bias", {3 * C});
    add(h + "attn.c_proj.weight", {C, C});
    add(h + "attn.c_proj.bias", {C});
    add(h + "ln_2.weight", {C});
    add(h + "ln_2.bias", {C});
    add(h + "mlp.c_fc.weight", {C, 4 * C});
    add(h + "mlp.c_fc.bias", {4 * C});
    add(h + "mlp.c_proj.weight", {4 * C, C});
    add(h + "mlp.c_proj.bias", {C});
  }
  add("transformer.ln_f.weight", {C});
  add("transformer.ln_f.bias", {C});
  return t;
}

static bool endsWith(const std::string& s, const char* suf) {
  size_t n = std::char_traits<char>::length(suf);
  return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

std::vector<float> gpt2InitParams(const GPT2Config& cfg, uint64_t seed) {
  auto layout = gpt2ParamLayout(cfg);
  std::vector<float> p(layout.back().offset + layout.back().numel);
  Rng rng(seed);
  const double residStd = 0.02 / std::sqrt(2.0 * cfg.numLayers);
  for (const auto& t : layout) {
    float* d = p.data() + t.offset;
    const bool isLn = t.name.find(".ln_") != std::string::npos;
    if (endsWith(t.name, ".bias")) {
      for (size_t i = 0; i < t.numel; i++) d[i] = 0.0f;
    } else if (isLn) {
      for (size_t i = 0; i < t.numel; i++) d[i] = 1.0f;
    } else {
      const double sd = endsWith(t.name, "c_proj.weight") ? residStd : 0.02;
      for (size_t i = 0; i < t.numel; i++) d[i] = float(rng.normal() * sd);
    }
  }
  return p;
}

// ---- conversions -------------------------------------------------------------

void convertToFloat(DType dt, const void* src, float* dst, size_t n) {
  switch (dt) {
    case DType::f32: toAcc(static_cast<const float*>(src), dst, n); break;
    case DType::bf16: toAcc(static_cast<const bf16*>(src), dst, n); break;
    case DType::f16: toAcc(static_cast<const f16*>(src), dst, n); break;
    case DType::f64: {
      const double* s = static_cast<const double*>(src);
      for (size_t i = 0; i < n; i++) dst[i] = float(s[i]);
      break;
    }
  }
}

void convertFromFloat(DType dt, const float* src, void* dst, size_t n) {
  switch (dt) {
    case DType::f32: fromAcc(src, static_cast<float*>(dst), n); break;
    case DType::bf16: fromAcc(src, static_cast<bf16*>(dst), n); break;
    case DType::f16: fromAcc(src, static_cast<f16*>(dst), n); break;
    case DType::f64: {
      double* d = static_cast<double*>(dst);
      for (size_t i = 0; i < n; i++) d[i] = double(src[i]);
      break;
    }
  }
}

Model::Model(const GPT2Config& cfg, DType dt) : cfg_(cfg), dtype_(dt) {
  if (cfg.channels % cfg.numHeads != 0) throw std::invalid_argument("channels % heads != 0");
  tensors_ = gpt2ParamLayout(cfg);
  numParams_ = tensors_.back().offset + tensors_.back().numel;
}

void Model::unitTensors(int u, int* first, int* end) const {
  const int L = cfg_.numLayers;
  if (u == 0) {
    *first = kWte, *end = kFirstLayer;
  } else if (unitBlock(u) >= 0) {
    const int block = kFirstLayer + kSlots * unitBlock(u);
    *first = u == attentionUnit(unitBlock(u)) ? block + kLn1W : block + kLn2W;
    *end = u == attentionUnit(unitBlock(u)) ? block + kLn2W : block + kSlots;
  } else {
    *first = kFirstLayer + kSlots * L, *end = *first + 2;
  }
}

void Model::getParams(float* out) const { convertToFloat(dtype_, paramData(), out, numParams_); }
void Model::setParams(const float* in) { convertFromFloat(dtype_, in, paramData(), numParams_); }
void Model::getGrads(float* out) const { convertToFloat(dtype_, gradData(), out, numParams_); }

// ---- the model ---------------------------------------------------------------

namespace {

template <class T>
class GPT2 final : public Model {
  using A = Acc<T>;

 public:
  GPT2(const GPT2Config& cfg) : Model(cfg, dtypeOf<T>()) {
    paramPtr_.resize(tensors_.size());
    gradPtr_.resize(tensors_.size());
    setFlatParams(true);
    setFlatGrads(true);
  }

  void* paramData() override { return params_.empty() ? nullptr : params_.data(); }
  void* gradData() override { return grads_.empty() ? nullptr : grads_.data(); }
  void zeroGrad() override { fillZero(grads_.data(), grads_.size()); }
  void setFlatParams(bool allocated) override { setFlat(allocated, params_, paramPtr_); }
  void setFlatGrads(bool allocated) override { setFlat(allocated, grads_, gradPtr_); }

  double forward(const int* tokens, const int* targets, int B, int Tn) override {
    return forwardPart(whole(), kWholeSlot, tokens, targets, nullptr, nullptr, B, Tn);
  }

  void backward(double scale) override {
    backwardPart(whole(), kWholeSlot, BackwardPiece::all, scale, nullptr, nullptr);
  }

  double forwardPart(const ModelPart& part, int slot, const int* tokens, const int* targets, const void* in,
                     void* out, int B, int Tn) override {
    if (Tn > cfg_.maxSeq || Tn <= 0 || B <= 0) throw std::invalid_argument("bad forward shape");
    if (part.firstBlock < 0 || part.endBlock > cfg_.numLayers || part.firstBlock > part.endBlock)
      throw std::invalid_argument("bad model part");
    Slot& s = slots_[slot];
    ensureActs(s, part, B, Tn);
    const int C = cfg_.channels, V = cfg_.vocabSize;
    const int N = B * Tn;
    s.hasTargets = targets != nullptr;
    if (targets) s.targets.assign(targets, targets + N);
    s.drop = (training_ && dropoutP_ > 0) ? Dropout{dropoutP_, dropoutSeed_, 0} : Dropout{};
    if (part.embed) {
      s.tokens.assign(tokens, tokens + N);
      for (int i = 0; i < N; i++)
        if (s.tokens[i] < 0 || s.tokens[i] >= V) throw std::invalid_argument("token out of range");
      unitUsed(Pass::forward, 0);
      encoderForward(s.input.data(), s.tokens.data(), P(kWte), P(kWpe), B, Tn, C);
      if (s.drop.active())
        dropoutApply(s.input.data(), s.input.data(), size_t(N) * C, s.drop.at(kEmbedStream));
    } else {
      std::memcpy(s.input.data(), in, sizeof(T) * N * C);
    }
    for (int l = part.firstBlock; l < part.endBlock; l++)
      blockForward(Pass::forward, s, l, B, Tn, blockIn(s, part, l), blockOut(s, part, l), acts(s, part, l));
    if (checkpoint_) ckptHolds_ = {slot, part.endBlock - 1};
    const T* last = blockIn(s, part, part.endBlock);
    if (!part.head) {
      std::memcpy(out, last, sizeof(T) * N * C);
      return 0.0;
    }
    unitUsed(Pass::forward, numUnits() - 1);
    layernormForward(s.lnf.data(), s.lnfMean.data(), s.lnfRstd.data(), last, P(lnfW()), P(lnfW() + 1), N, C);
    // LM head tied to wte [V,C]: logits = lnf @ wte^T
    unitUsed(Pass::forward, 0);
    gemm(false, true, N, V, C, s.lnf.data(), P(kWte), s.logits.data(), false);
    if (!targets) return 0.0;
    return crossEntropyForward(s.losses.data(), s.logits.data(), s.targets.data(), N, V);
  }

  void backwardPart(const ModelPart& part, int slot, BackwardPiece piece, double scale, const void* dOut,
                    void* dIn) override {
    auto it = slots_.find(slot);
    if (it == slots_.end()) throw std::logic_error("backward of a micro-batch without its forward");
    Slot& s = it->second;
    if (part.head && !s.hasTargets) throw std::logic_error("backward without a forward with targets");
    // Under checkpointing the weights' gradients come with the input's (see gpt2.h).
    const bool inputPass = piece != BackwardPiece::weight;
    const bool weightNow = piece == BackwardPiece::all || checkpoint_;
    if (inputPass && s.inputDone) throw std::logic_error("second input backward of a micro-batch");
    if (!inputPass && !s.inputDone) throw std::logic_error("weight backward before the input backward");
    if (!inputPass) {
      if (!checkpoint_) weightBackward(s, part);
      slots_.erase(it);
      return;
    }
    inputBackward(s, slot, part, scale, static_cast<const T*>(dOut), static_cast<T*>(dIn), weightNow);
    s.inputDone = true;
    if (piece == BackwardPiece::all && slot != kWholeSlot) slots_.erase(slot);
  }

  void releaseSlot(int slot) override { slots_.erase(slot); }

  void logitsRow(int b, int t, float* out) const override {
    const Slot& s = slots_.at(kWholeSlot);
    const T* r = s.logits.data() + (size_t(b) * s.seq + t) * cfg_.vocabSize;
    for (int v = 0; v < cfg_.vocabSize; v++) out[v] = float(ld(r[v]));
  }

  void setActivationCheckpointing(bool on) override {
    if (on != checkpoint_) {
      checkpoint_ = on;
      slots_.clear();  // re-laid out on the next forward
      ckpt_ = Layer{};
      ckptHolds_ = {-1, -1};
    }
  }
  bool activationCheckpointing() const override { return checkpoint_; }

  size_t activationBytes() const override {
    size_t n = dresid_.size() + dbuf_.size() + dtmp_.size() + dqkv_.size() + dfch_.size() + dfchGelu_.size() +
               dlogits_.size();
    return n * sizeof(T) + layerBytes(ckpt_) + savedActivationBytes();
  }

  size_t savedActivationBytes() const override {
    size_t n = 0, na = 0, layers = 0;
    for (const auto& [id, s] : slots_) {
      n += s.input.size() + s.lnf.size() + s.logits.size() + s.dlogits.size() + s.dEmb.size();
      na += s.lnfMean.size() * 2 + s.losses.size();
      for (const auto& o : s.outs) n += o.size();
      for (const Layer& a : s.layers) layers += layerBytes(a);
      for (const Deferred& d : s.deferred) n += d.dMlpOut.size() + d.dfch.size() + d.dAttnOut.size() + d.dqkv.size();
    }
    return n * sizeof(T) + na * sizeof(A) + layers;
  }

 private:
  struct Layer {
    std::vector<T> ln1, qkv, atty, att, attproj, res1, ln2, fch, fchGelu, fcproj, res2;
    std::vector<A> ln1Mean, ln1Rstd, ln2Mean, ln2Rstd;
  };
  // A block's output gradients that its weight gradients need, kept from the
  // input pass to the weight pass.
  struct Deferred {
    std::vector<T> dMlpOut, dfch, dAttnOut, dqkv;
  };
  // One micro-batch in flight through a part.
  struct Slot {
    int B = 0, seq = 0;
    bool hasTargets = false, inputDone = false;
    std::vector<int> tokens, targets;
    Dropout drop;                     // the masks of this forward (inactive in eval mode or p = 0)
    std::vector<T> input;             // the part's input (the embeddings' output when it has them)
    std::vector<Layer> layers;        // per block of the part; none when checkpointing
    std::vector<std::vector<T>> outs; // block outputs when checkpointing
    std::vector<T> lnf, logits;
    std::vector<A> lnfMean, lnfRstd, losses;
    std::vector<Deferred> deferred;   // per block, split backward only
    std::vector<T> dlogits, dEmb;     // split backward: the head's and the embeddings' output gradients
  };
  static constexpr int kWholeSlot = kWholeModelSlot;
  static size_t layerBytes(const Layer& a) {
    return (a.ln1.size() + a.qkv.size() + a.atty.size() + a.att.size() + a.attproj.size() + a.res1.size() +
            a.ln2.size() + a.fch.size() + a.fchGelu.size() + a.fcproj.size() + a.res2.size()) * sizeof(T) +
           a.ln1Mean.size() * 4 * sizeof(A);
  }
  ModelPart whole() const { return {0, cfg_.numLayers, true, true}; }

  // The input pass: d(part input) from d(part output), and the weights' gradients
  // too when weightNow; otherwise what the weight pass needs is kept in the slot.
  void inputBackward(Slot& s, int slot, const ModelPart& part, double scale, const T* dOut, T* dIn, bool weightNow) {
    const int B = s.B, Tn = s.seq, C = cfg_.channels, NH = cfg_.numHeads, V = cfg_.vocabSize;
    const int N = B * Tn;
    if (!weightNow) s.deferred.resize(size_t(part.endBlock - part.firstBlock));
    auto keep = [&](std::vector<T>& dst, const T* src, size_t n) {
      if (!weightNow) dst.assign(src, src + n);
    };
    if (part.head) {
      // mean over N positions
      crossEntropyBackward(dlogits_.data(), s.logits.data(), s.targets.data(), N, V, A(scale / double(N)));
      // LM head: dlnf = dlogits @ wte; dwte += dlogits^T @ lnf
      unitUsed(Pass::backward, 0);
      gemm(false, false, N, C, V, dlogits_.data(), P(kWte), dbuf_.data(), false);
      if (weightNow) gemm(true, false, V, C, N, dlogits_.data(), s.lnf.data(), G(kWte), true);
      keep(s.dlogits, dlogits_.data(), size_t(N) * V);
      const T* last = blockIn(s, part, part.endBlock);
      fillZero(dresid_.data(), size_t(N) * C);
      unitUsed(Pass::backward, numUnits() - 1);
      layernormBackward(dresid_.data(), G(lnfW()), G(lnfW() + 1), dbuf_.data(), last, P(lnfW()),
                        s.lnfMean.data(), s.lnfRstd.data(), N, C);
      gradsReady(tensors_[lnfW()].offset);
    } else {
      std::memcpy(dresid_.data(), dOut, sizeof(T) * N * C);
    }
    // dresid_ holds d(loss)/d(residual stream) on the way down.
    for (int l = part.endBlock - 1; l >= part.firstBlock; l--) {
      Layer& a = acts(s, part, l);
      const T* x = blockIn(s, part, l);
      // Activation checkpointing: recompute this block's activations from its input
      // (bit-identical to the forward pass) into the shared work buffers, unless
      // they are still there from this slot's forward.
      if (checkpoint_ && !(ckptHolds_.first == slot && ckptHolds_.second == l)) {
        blockForward(Pass::backward, s, l, B, Tn, x, a.res2.data(), a);
      } else if (checkpoint_) {
        unitUsed(Pass::backward, attentionUnit(l));
        unitUsed(Pass::backward, mlpUnit(l));
      } else {
        unitUsed(Pass::backward, mlpUnit(l));
      }
      ckptHolds_ = {-1, -1};
      T* dw = nullptr;
      T* db = nullptr;
      auto wg = [&](int slot) {  // the weight and bias gradients of a matmul, now or later
        dw = weightNow ? G(l, slot) : nullptr;
        db = weightNow ? G(l, slot + 1) : nullptr;
      };
      Deferred* d = weightNow ? nullptr : &s.deferred[size_t(l - part.firstBlock)];
      // res2 = res1 + mlp(ln2(res1))
      // Residual-branch dropout: the branch sees dresid through its mask.
      const T* dMlpOut = dresid_.data();
      if (s.drop.active()) {
        dropoutApply(dtmp_.data(), dresid_.data(), size_t(N) * C, s.drop.at(3 * l + 2));
        dMlpOut = dtmp_.data();
      }
      wg(kMprojW);
      matmulBackward(dfchGelu_.data(), dw, db, dMlpOut, a.fchGelu.data(), P(l, kMprojW), N, 4 * C, C);
      if (d) keep(d->dMlpOut, dMlpOut, size_t(N) * C);
      gradsReady(offset(l, kMprojW));
      geluBackward(dfch_.data(), a.fch.data(), dfchGelu_.data(), size_t(N) * 4 * C);
      wg(kFcW);
      matmulBackward(dbuf_.data(), dw, db, dfch_.data(), a.ln2.data(), P(l, kFcW), N, C, 4 * C);
      if (d) keep(d->dfch, dfch_.data(), size_t(N) * 4 * C);
      gradsReady(offset(l, kFcW));
      layernormBackward(dresid_.data(), G(l, kLn2W), G(l, kLn2B), dbuf_.data(), a.res1.data(), P(l, kLn2W),
                        a.ln2Mean.data(), a.ln2Rstd.data(), N, C);
      gradsReady(offset(l, kLn2W));
      // res1 = x + attn(ln1(x))
      unitUsed(Pass::backward, attentionUnit(l));
      const T* dAttnOut = dresid_.data();
      if (s.drop.active()) {
        dropoutApply(dtmp_.data(), dresid_.data(), size_t(N) * C, s.drop.at(3 * l + 1));
        dAttnOut = dtmp_.data();
      }
      wg(kAprojW);
      matmulBackward(dbuf_.data(), dw, db, dAttnOut, a.atty.data(), P(l, kAprojW), N, C, C);
      if (d) keep(d->dAttnOut, dAttnOut, size_t(N) * C);
      gradsReady(offset(l, kAprojW));
      attentionBackward(dqkv_.data(), dbuf_.data(), a.qkv.data(), a.att.data(), B, Tn, C, NH, s.drop.at(3 * l));
      wg(kAttnW);
      matmulBackward(dbuf_.data(), dw, db, dqkv_.data(), a.ln1.data(), P(l, kAttnW), N, C, 3 * C);
      if (d) keep(d->dqkv, dqkv_.data(), size_t(N) * 3 * C);
      gradsReady(offset(l, kAttnW));
      layernormBackward(dresid_.data(), G(l, kLn1W), G(l, kLn1B), dbuf_.data(), x, P(l, kLn1W), a.ln1Mean.data(),
                        a.ln1Rstd.data(), N, C);
      gradsReady(offset(l, kLn1W));
    }
    if (!part.embed) {
      std::memcpy(dIn, dresid_.data(), sizeof(T) * N * C);
      return;
    }
    unitUsed(Pass::backward, 0);
    const T* dEmb = dresid_.data();
    if (s.drop.active()) {
      dropoutApply(dtmp_.data(), dresid_.data(), size_t(N) * C, s.drop.at(kEmbedStream));
      dEmb = dtmp_.data();
    }
    if (weightNow) {
      encoderBackward(G(kWte), G(kWpe), dEmb, s.tokens.data(), B, Tn, C, V);
      gradsReady(0);  // wpe and the tied wte (whose head part came first) last
    } else {
      keep(s.dEmb, dEmb, size_t(N) * C);
    }
  }

  // The weight pass of a split backward, from what the input pass kept.
  void weightBackward(Slot& s, const ModelPart& part) {
    const int N = s.B * s.seq, C = cfg_.channels, V = cfg_.vocabSize;
    if (part.head) gemm(true, false, V, C, N, s.dlogits.data(), s.lnf.data(), G(kWte), true);
    for (int l = part.endBlock - 1; l >= part.firstBlock; l--) {
      const Layer& a = acts(s, part, l);
      const Deferred& d = s.deferred[size_t(l - part.firstBlock)];
      matmulBackward<T>(nullptr, G(l, kMprojW), G(l, kMprojB), d.dMlpOut.data(), a.fchGelu.data(), nullptr, N,
                        4 * C, C);
      matmulBackward<T>(nullptr, G(l, kFcW), G(l, kFcB), d.dfch.data(), a.ln2.data(), nullptr, N, C, 4 * C);
      matmulBackward<T>(nullptr, G(l, kAprojW), G(l, kAprojB), d.dAttnOut.data(), a.atty.data(), nullptr, N, C, C);
      matmulBackward<T>(nullptr, G(l, kAttnW), G(l, kAttnB), d.dqkv.data(), a.ln1.data(), nullptr, N, C, 3 * C);
    }
    if (part.embed) encoderBackward(G(kWte), G(kWpe), s.dEmb.data(), s.tokens.data(), s.B, s.seq, C, V);
  }

  // One transformer block: x -> out, keeping its activations in `a`.
  void blockForward(Pass pass, const Slot& s, int l, int B, int Tn, const T* x, T* out, Layer& a) {
    const int C = cfg_.channels, NH = cfg_.numHeads, N = B * Tn;
    const Dropout& drop = s.drop;
    unitUsed(pass, attentionUnit(l));
    layernormForward(a.ln1.data(), a.ln1Mean.data(), a.ln1Rstd.data(), x, P(l, kLn1W), P(l, kLn1B), N,
                     C);
    matmulForward(a.qkv.data(), a.ln1.data(), P(l, kAttnW), P(l, kAttnB), N, C, 3 * C);
    attentionForward(a.atty.data(), a.att.data(), a.qkv.data(), B, Tn, C, NH, drop.at(3 * l));
    matmulForward(a.attproj.data(), a.atty.data(), P(l, kAprojW), P(l, kAprojB), N, C, C);
    if (drop.active())
      dropoutApply(a.attproj.data(), a.attproj.data(), size_t(N) * C, drop.at(3 * l + 1));
    residualForward(a.res1.data(), x, a.attproj.data(), size_t(N) * C);
    unitUsed(pass, mlpUnit(l));
    layernormForward(a.ln2.data(), a.ln2Mean.data(), a.ln2Rstd.data(), a.res1.data(), P(l, kLn2W),
                     P(l, kLn2B), N, C);
    matmulForward(a.fch.data(), a.ln2.data(), P(l, kFcW), P(l, kFcB), N, C, 4 * C);
    geluForward(a.fchGelu.data(), a.fch.data(), size_t(N) * 4 * C);
    matmulForward(a.fcproj.data(), a.fchGelu.data(), P(l, kMprojW), P(l, kMprojB), N, 4 * C, C);
    if (drop.active())
      dropoutApply(a.fcproj.data(), a.fcproj.data(), size_t(N) * C, drop.at(3 * l + 2));
    residualForward(out, a.res1.data(), a.fcproj.data(), size_t(N) * C);
  }

  // Without checkpointing every block keeps its own activations; with it, blocks
  // share one set and only the block outputs (the residual stream) are kept.
  Layer& acts(Slot& s, const ModelPart& part, int l) {
    return checkpoint_ ? ckpt_ : s.layers[size_t(l - part.firstBlock)];
  }
  const Layer& acts(const Slot& s, const ModelPart& part, int l) const {
    return checkpoint_ ? ckpt_ : s.layers[size_t(l - part.firstBlock)];
  }
  // The input of block l of the part (l == endBlock: the part's last block's output).
  const T* blockIn(Slot& s, const ModelPart& part, int l) {
    return l == part.firstBlock ? s.input.data() : blockOut(s, part, l - 1);
  }
  T* blockOut(Slot& s, const ModelPart& part, int l) {
    const size_t i = size_t(l - part.firstBlock);
    return checkpoint_ ? s.outs[i].data() : s.layers[i].res2.data();
  }

  int lnfW() const { return kFirstLayer + kSlots * cfg_.numLayers; }
  void setFlat(bool allocated, std::vector<T>& flat, std::vector<void*>& ptrs) {
    if (!allocated) {
      std::vector<T>().swap(flat);
      return;
    }
    flat.assign(numParams_, st<T>(A(0)));
    for (size_t t = 0; t < tensors_.size(); t++) ptrs[t] = flat.data() + tensors_[t].offset;
  }
  T* P(int idx) { return static_cast<T*>(paramPtr_[size_t(idx)]); }
  T* P(int l, int slot) { return P(kFirstLayer + kSlots * l + slot); }
  T* G(int idx) { return static_cast<T*>(gradPtr_[size_t(idx)]); }
  size_t offset(int l, int slot) const { return tensors_[kFirstLayer + kSlots * l + slot].offset; }
  T* G(int l, int slot) { return G(kFirstLayer + kSlots * l + slot); }

  void ensureActs(Slot& s, const ModelPart& part, int B, int Tn) {
    s.B = B;
    s.seq = Tn;
    s.inputDone = false;
    s.deferred.clear();
    const size_t N = size_t(B) * Tn, C = cfg_.channels, V = cfg_.vocabSize;
    const size_t att = size_t(B) * cfg_.numHeads * Tn * Tn;
    const size_t blocks = size_t(part.endBlock - part.firstBlock);
    auto grow = [](auto& v, size_t n) {
      if (v.size() < n) v.resize(n);
    };
    auto layer = [&](Layer& a) {
      grow(a.ln1, N * C); grow(a.qkv, N * 3 * C); grow(a.atty, N * C); grow(a.att, att);
      grow(a.attproj, N * C); grow(a.res1, N * C); grow(a.ln2, N * C); grow(a.fch, N * 4 * C);
      grow(a.fchGelu, N * 4 * C); grow(a.fcproj, N * C); grow(a.res2, N * C);
      grow(a.ln1Mean, N); grow(a.ln1Rstd, N); grow(a.ln2Mean, N); grow(a.ln2Rstd, N);
    };
    if (checkpoint_) {
      layer(ckpt_);
      s.outs.resize(blocks);
      for (auto& o : s.outs) grow(o, N * C);
    } else {
      s.layers.resize(blocks);
      for (Layer& a : s.layers) layer(a);
    }
    grow(s.input, N * C);
    if (part.head) {
      grow(s.lnf, N * C); grow(s.lnfMean, N); grow(s.lnfRstd, N); grow(s.logits, N * V); grow(s.losses, N);
      grow(dlogits_, N * V);
    }
    grow(dresid_, N * C); grow(dbuf_, N * C);
    if (dropoutP_ > 0) grow(dtmp_, N * C);
    grow(dqkv_, N * 3 * C); grow(dfch_, N * 4 * C); grow(dfchGelu_, N * 4 * C);
  }

  std::vector<T> params_, grads_;
  bool checkpoint_ = false;
  std::map<int, Slot> slots_;  // micro-batches in flight; kWholeSlot for forward()/backward()
  Layer ckpt_;                 // checkpointing: the one block whose activations exist
  std::pair<int, int> ckptHolds_{-1, -1};  // (slot, block) that ckpt_ holds from a forward
  // The backward's work buffers, shared by every slot.
  std::vector<T> dresid_, dbuf_, dtmp_, dqkv_, dfch_, dfchGelu_, dlogits_;
  static constexpr uint64_t kEmbedStream = uint64_t(1) << 40;
};

}  // namespace

std::unique_ptr<Model> makeGPT2(const GPT2Config& cfg, DType dtype) {
  switch (dtype) {
    case DType::f32: return std::make_unique<GPT2<float>>(cfg);
    case DType::bf16: return std::make_unique<GPT2<bf16>>(cfg);
    case DType::f16: return std::make_unique<GPT2<f16>>(cfg);
    case DType::f64: return std::make_unique<GPT2<double>>(cfg);
  }
  return nullptr;
}

}  // namespace weft::train
