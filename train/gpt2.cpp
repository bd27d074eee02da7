#include "train/gpt2.h"

#include <cmath>
#include <stdexcept>

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
  if (u == 0) *first = kWte, *end = kFirstLayer;
  else if (u <= L) *first = kFirstLayer + kSlots * (u - 1), *end = *first + kSlots;
  else *first = kFirstLayer + kSlots * L, *end = *first + 2;
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
    if (Tn > cfg_.maxSeq || Tn <= 0 || B <= 0) throw std::invalid_argument("bad forward shape");
    ensureActs(B, Tn);
    const int C = cfg_.channels, V = cfg_.vocabSize, L = cfg_.numLayers;
    const int N = B * Tn;
    tokens_.assign(tokens, tokens + N);
    for (int i = 0; i < N; i++)
      if (tokens_[i] < 0 || tokens_[i] >= V) throw std::invalid_argument("token out of range");
    hasTargets_ = targets != nullptr;
    if (targets) targets_.assign(targets, targets + N);

    drop_ = (training_ && dropoutP_ > 0) ? Dropout{dropoutP_, dropoutSeed_, 0} : Dropout{};
    unitUsed(Pass::forward, 0);
    encoderForward(encoded_.data(), tokens_.data(), P(kWte), P(kWpe), B, Tn, C);
    if (drop_.active()) dropoutApply(encoded_.data(), encoded_.data(), size_t(N) * C, drop_.at(kEmbedStream));
    for (int l = 0; l < L; l++) {
      unitUsed(Pass::forward, l + 1);
      blockForward(l, B, Tn, blockIn(l), blockOut(l), acts(l));
    }
    const T* last = blockIn(L);
    unitUsed(Pass::forward, L + 1);
    layernormForward(lnf_.data(), lnfMean_.data(), lnfRstd_.data(), last, P(lnfW()), P(lnfW() + 1),
                     N, C);
    // LM head tied to wte [V,C]: logits = lnf @ wte^T
    unitUsed(Pass::forward, 0);
    gemm(false, true, N, V, C, lnf_.data(), P(kWte), logits_.data(), false);
    if (!targets) return 0.0;
    return crossEntropyForward(losses_.data(), logits_.data(), targets_.data(), N, V);
  }

  void backward(double scale) override {
    if (!hasTargets_) throw std::logic_error("backward without a forward with targets");
    const int B = B_, Tn = T_, C = cfg_.channels, NH = cfg_.numHeads, V = cfg_.vocabSize,
              L = cfg_.numLayers;
    const int N = B * Tn;
    // mean over N positions
    crossEntropyBackward(dlogits_.data(), logits_.data(), targets_.data(), N, V,
                         A(scale / double(N)));
    // LM head: dlnf = dlogits @ wte; dwte += dlogits^T @ lnf
    unitUsed(Pass::backward, 0);
    gemm(false, false, N, C, V, dlogits_.data(), P(kWte), dbuf_.data(), false);
    gemm(true, false, V, C, N, dlogits_.data(), lnf_.data(), G(kWte), true);
    const T* last = blockIn(L);
    fillZero(dresid_.data(), dresid_.size());
    unitUsed(Pass::backward, L + 1);
    layernormBackward(dresid_.data(), G(lnfW()), G(lnfW() + 1), dbuf_.data(), last, P(lnfW()),
                      lnfMean_.data(), lnfRstd_.data(), N, C);
    gradsReady(tensors_[lnfW()].offset);
    // dresid_ holds d(loss)/d(residual stream) on the way down.
    for (int l = L - 1; l >= 0; l--) {
      Layer& a = acts(l);
      const T* x = blockIn(l);
      unitUsed(Pass::backward, l + 1);
      // Activation checkpointing: recompute this block's activations from its input
      // (bit-identical to the forward pass) into the shared work buffers.
      // The last block's are still there from the forward pass.
      if (checkpoint_ && l != L - 1) blockForward(l, B, Tn, x, a.res2.data(), a);
      // res2 = res1 + mlp(ln2(res1))
      // Residual-branch dropout: the branch sees dresid through its mask.
      const T* dMlpOut = dresid_.data();
      if (drop_.active()) {
        dropoutApply(dtmp_.data(), dresid_.data(), size_t(N) * C, drop_.at(3 * l + 2));
        dMlpOut = dtmp_.data();
      }
      matmulBackward(dfchGelu_.data(), G(l, kMprojW), G(l, kMprojB), dMlpOut, a.fchGelu.data(),
                     P(l, kMprojW), N, 4 * C, C);
      gradsReady(offset(l, kMprojW));
      geluBackward(dfch_.data(), a.fch.data(), dfchGelu_.data(), size_t(N) * 4 * C);
      matmulBackward(dbuf_.data(), G(l, kFcW), G(l, kFcB), dfch_.data(), a.ln2.data(),
                     P(l, kFcW), N, C, 4 * C);
      gradsReady(offset(l, kFcW));
      layernormBackward(dresid_.data(), G(l, kLn2W), G(l, kLn2B), dbuf_.data(), a.res1.data(),
                        P(l, kLn2W), a.ln2Mean.data(), a.ln2Rstd.data(), N, C);
      gradsReady(offset(l, kLn2W));
      // res1 = x + attn(ln1(x))
      const T* dAttnOut = dresid_.data();
      if (drop_.active()) {
        dropoutApply(dtmp_.data(), dresid_.data(), size_t(N) * C, drop_.at(3 * l + 1));
        dAttnOut = dtmp_.data();
      }
      matmulBackward(dbuf_.data(), G(l, kAprojW), G(l, kAprojB), dAttnOut, a.atty.data(),
                     P(l, kAprojW), N, C, C);
      gradsReady(offset(l, kAprojW));
      attentionBackward(dqkv_.data(), dbuf_.data(), a.qkv.data(), a.att.data(), B, Tn, C, NH,
                        drop_.at(3 * l));
      matmulBackward(dbuf_.data(), G(l, kAttnW), G(l, kAttnB), dqkv_.data(), a.ln1.data(),
                     P(l, kAttnW), N, C, 3 * C);
      gradsReady(offset(l, kAttnW));
      layernormBackward(dresid_.data(), G(l, kLn1W), G(l, kLn1B), dbuf_.data(), x, P(l, kLn1W),
                        a.ln1Mean.data(), a.ln1Rstd.data(), N, C);
      gradsReady(offset(l, kLn1W));
    }
    unitUsed(Pass::backward, 0);
    const T* dEmb = dresid_.data();
    if (drop_.active()) {
      dropoutApply(dtmp_.data(), dresid_.data(), size_t(N) * C, drop_.at(kEmbedStream));
      dEmb = dtmp_.data();
    }
    encoderBackward(G(kWte), G(kWpe), dEmb, tokens_.data(), B, Tn, C, V);
    gradsReady(0);  // wpe and the tied wte (whose head part came first) last
  }

  void logitsRow(int b, int t, float* out) const override {
    const T* r = logits_.data() + (size_t(b) * T_ + t) * cfg_.vocabSize;
    for (int v = 0; v < cfg_.vocabSize; v++) out[v] = float(ld(r[v]));
  }

  void setActivationCheckpointing(bool on) override {
    if (on != checkpoint_) {
      checkpoint_ = on;
      layers_.clear();  // re-laid out on the next forward
      outs_.clear();
    }
  }
  bool activationCheckpointing() const override { return checkpoint_; }

  size_t activationBytes() const override {
    size_t n = encoded_.size() + lnf_.size() + logits_.size() + dresid_.size() + dbuf_.size() + dtmp_.size() +
               dqkv_.size() + dfch_.size() + dfchGelu_.size() + dlogits_.size();
    size_t na = lnfMean_.size() * 2 + losses_.size();
    for (const auto& o : outs_) n += o.size();
    for (const Layer& a : layers_) {
      n += a.ln1.size() + a.qkv.size() + a.atty.size() + a.att.size() + a.attproj.size() +
           a.res1.size() + a.ln2.size() + a.fch.size() + a.fchGelu.size() + a.fcproj.size() +
           a.res2.size();
      na += a.ln1Mean.size() * 4;
    }
    return n * sizeof(T) + na * sizeof(A);
  }

 private:
  struct Layer {
    std::vector<T> ln1, qkv, atty, att, attproj, res1, ln2, fch, fchGelu, fcproj, res2;
    std::vector<A> ln1Mean, ln1Rstd, ln2Mean, ln2Rstd;
  };

  // One transformer block: x -> out, keeping its activations in `a`.
  void blockForward(int l, int B, int Tn, const T* x, T* out, Layer& a) {
    const int C = cfg_.channels, NH = cfg_.numHeads, N = B * Tn;
    layernormForward(a.ln1.data(), a.ln1Mean.data(), a.ln1Rstd.data(), x, P(l, kLn1W), P(l, kLn1B), N,
                     C);
    matmulForward(a.qkv.data(), a.ln1.data(), P(l, kAttnW), P(l, kAttnB), N, C, 3 * C);
    attentionForward(a.atty.data(), a.att.data(), a.qkv.data(), B, Tn, C, NH, drop_.at(3 * l));
    matmulForward(a.attproj.data(), a.atty.data(), P(l, kAprojW), P(l, kAprojB), N, C, C);
    if (drop_.active())
      dropoutApply(a.attproj.data(), a.attproj.data(), size_t(N) * C, drop_.at(3 * l + 1));
    residualForward(a.res1.data(), x, a.attproj.data(), size_t(N) * C);
    layernormForward(a.ln2.data(), a.ln2Mean.data(), a.ln2Rstd.data(), a.res1.data(), P(l, kLn2W),
                     P(l, kLn2B), N, C);
    matmulForward(a.fch.data(), a.ln2.data(), P(l, kFcW), P(l, kFcB), N, C, 4 * C);
    geluForward(a.fchGelu.data(), a.fch.data(), size_t(N) * 4 * C);
    matmulForward(a.fcproj.data(), a.fchGelu.data(), P(l, kMprojW), P(l, kMprojB), N, 4 * C, C);
    if (drop_.active())
      dropoutApply(a.fcproj.data(), a.fcproj.data(), size_t(N) * C, drop_.at(3 * l + 2));
    residualForward(out, a.res1.data(), a.fcproj.data(), size_t(N) * C);
  }

  // Without checkpointing every block keeps its own activations; with it, blocks
  // share one set and only the block outputs (the residual stream) are kept.
  Layer& acts(int l) { return layers_[checkpoint_ ? 0 : l]; }
  const T* blockIn(int l) { return l == 0 ? encoded_.data() : blockOut(l - 1); }
  T* blockOut(int l) { return checkpoint_ ? outs_[l].data() : layers_[l].res2.data(); }

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

  void ensureActs(int B, int Tn) {
    B_ = B;
    T_ = Tn;
    const size_t N = size_t(B) * Tn, C = cfg_.channels, V = cfg_.vocabSize;
    const size_t att = size_t(B) * cfg_.numHeads * Tn * Tn;
    auto grow = [](auto& v, size_t n) {
      if (v.size() < n) v.resize(n);
    };
    layers_.resize(checkpoint_ ? 1 : cfg_.numLayers);
    if (checkpoint_) {
      outs_.resize(cfg_.numLayers);
      for (auto& o : outs_) grow(o, N * C);
    }
    for (Layer& a : layers_) {
      grow(a.ln1, N * C); grow(a.qkv, N * 3 * C); grow(a.atty, N * C); grow(a.att, att);
      grow(a.attproj, N * C); grow(a.res1, N * C); grow(a.ln2, N * C); grow(a.fch, N * 4 * C);
      grow(a.fchGelu, N * 4 * C); grow(a.fcproj, N * C); grow(a.res2, N * C);
      grow(a.ln1Mean, N); grow(a.ln1Rstd, N); grow(a.ln2Mean, N); grow(a.ln2Rstd, N);
    }
    grow(encoded_, N * C); grow(lnf_, N * C); grow(lnfMean_, N); grow(lnfRstd_, N);
    grow(logits_, N * V); grow(losses_, N);
    grow(dresid_, N * C); grow(dbuf_, N * C);
    if (dropoutP_ > 0) grow(dtmp_, N * C);
    grow(dqkv_, N * 3 * C); grow(dfch_, N * 4 * C);
    grow(dfchGelu_, N * 4 * C); grow(dlogits_, N * V);
  }

  std::vector<T> params_, grads_;
  int B_ = 0, T_ = 0;
  bool hasTargets_ = false;
  std::vector<int> tokens_, targets_;
  bool checkpoint_ = false;
  std::vector<Layer> layers_;
  std::vector<std::vector<T>> outs_;  // block outputs when checkpointing
  std::vector<T> encoded_, lnf_, logits_;
  std::vector<A> lnfMean_, lnfRstd_, losses_;
  std::vector<T> dresid_, dbuf_, dtmp_, dqkv_, dfch_, dfchGelu_, dlogits_;
  Dropout drop_;  // the masks of the last forward (inactive in eval mode or p = 0)
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
