#include "train/optim.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace weft::train {

double LrSchedule::at(int step) const {
  if (warmupSteps > 0 && step < warmupSteps) return maxLr * double(step + 1) / warmupSteps;
  if (step >= totalSteps) return minLr;
  const double span = double(totalSteps - warmupSteps);
  const double ratio = span > 0 ? double(step - warmupSteps) / span : 1.0;
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return minLr + coeff * (maxLr - minLr);
}

void LossScaler::update(bool foundInf) {
  if (!enabled) return;
  if (foundInf) {
    scale *= backoffFactor;
    goodSteps = 0;
  } else if (++goodSteps >= growthInterval) {
    scale *= growthFactor;
    goodSteps = 0;
  }
}

AdamW::AdamW(const Model& model, const AdamWConfig& cfg)
    : AdamW(model, cfg, {Segment{0, model.numParams()}}) {}

AdamW::AdamW(const Model& model, const AdamWConfig& cfg, std::vector<Segment> owned)
    : cfg_(cfg), owned_(std::move(owned)) {
  const size_t total = model.numParams();
  std::vector<float> full(total);
  model.getParams(full.data());
  size_t n = 0;
  for (const Segment& s : owned_) n += s.count;
  master.resize(n);
  gatherOwned(full.data(), master.data());
  m.assign(n, 0.0f);
  v.assign(n, 0.0f);
  std::vector<float> decay(total, 0.0f);
  for (const auto& t : model.tensors())
    if (t.decay) std::fill(decay.begin() + t.offset, decay.begin() + t.offset + t.numel, 1.0f);
  std::vector<float> owned01(n);
  gatherOwned(decay.data(), owned01.data());
  decay_.resize(n);
  for (size_t i = 0; i < n; i++) decay_[i] = owned01[i] != 0.0f;
}

void AdamW::loadFull(const Model& model, const std::vector<float>& full, const std::vector<float>& m1,
                     const std::vector<float>& m2) {
  if (full.size() != model.numParams() || m1.size() != full.size() || m2.size() != full.size())
    throw std::invalid_argument("optimizer state size differs from the model's");
  gatherOwned(full.data(), master.data());
  gatherOwned(m1.data(), m.data());
  gatherOwned(m2.data(), v.data());
}

void AdamW::gatherOwned(const float* full, float* owned) const {
  for (const Segment& s : owned_) {
    std::copy(full + s.offset, full + s.offset + s.count, owned);
    owned += s.count;
  }
}

void AdamW::scatterOwned(const float* owned, float* full) const {
  for (const Segment& s : owned_) {
    std::copy(owned, owned + s.count, full + s.offset);
    owned += s.count;
  }
}

void AdamW::writeParams(Model& model) const {
  const size_t es = dtypeSize(model.dtype());
  const float* src = master.data();
  for (const Segment& s : owned_) {
    convertFromFloat(model.dtype(), src, static_cast<char*>(model.paramData()) + s.offset * es, s.count);
    src += s.count;
  }
}

double AdamW::unscaleSumSquares(float* g, float inv) const {
  const long long n = (long long)master.size();
  // Global norm in double over fixed chunks summed in order, so the norm (and the
  // clip factor) is bit-reproducible; any Inf/NaN makes the sum non-finite.
  constexpr long long kChunks = 64;
  double partial[kChunks] = {};
#pragma omp parallel for schedule(static)
  for (long long c = 0; c < kChunks; c++) {
    const long long i0 = n * c / kChunks, i1 = n * (c + 1) / kChunks;
    double s = 0;
    for (long long i = i0; i < i1; i++) {
      g[i] *= inv;
      s += double(g[i]) * double(g[i]);
    }
    partial[c] = s;
  }
  double sumsq = 0;
  for (long long c = 0; c < kChunks; c++) sumsq += partial[c];
  return sumsq;
}

double AdamW::clipFactor(double gradNorm) const {
  return (cfg_.gradClip > 0 && gradNorm > cfg_.gradClip) ? cfg_.gradClip / (gradNorm + 1e-6) : 1.0;
}

void AdamW::update(const float* g, double lr, double clip) {
  const long long n = (long long)master.size();
  t++;
  const double b1 = cfg_.beta1, b2 = cfg_.beta2;
  const double bc1 = 1.0 - std::pow(b1, double(t)), bc2 = 1.0 - std::pow(b2, double(t));
  const float fb1 = float(b1), fb2 = float(b2), flr = float(lr), feps = float(cfg_.eps);
  const float fc1 = float(1.0 / bc1), fc2 = float(1.0 / bc2), fclip = float(clip);
  const float fdecay = float(1.0 - lr * cfg_.weightDecay);
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < n; i++) {
    const float gi = g[i] * fclip;
    m[i] = fb1 * m[i] + (1.0f - fb1) * gi;
    v[i] = fb2 * v[i] + (1.0f - fb2) * gi * gi;
    const float mhat = m[i] * fc1, vhat = v[i] * fc2;
    float p = master[i];
    if (decay_[i]) p *= fdecay;  // decoupled weight decay (PyTorch AdamW order)
    master[i] = p - flr * mhat / (std::sqrt(vhat) + feps);
  }
}

OptimStepResult AdamW::step(Model& model, double lr, double gradScale) {
  OptimStepResult r;
  if (master.size() != model.numParams()) throw std::logic_error("AdamW::step needs every element owned");
  grad_.resize(master.size());
  model.getGrads(grad_.data());
  const double sumsq = unscaleSumSquares(grad_.data(), float(1.0 / gradScale));
  if (!std::isfinite(sumsq)) {
    r.skipped = true;
    r.gradNorm = sumsq;
    return r;
  }
  r.gradNorm = std::sqrt(sumsq);
  update(grad_.data(), lr, clipFactor(r.gradNorm));
  writeParams(model);
  return r;
}

}  // namespace weft::train
