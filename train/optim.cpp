#include "train/optim.h"

#include <cmath>

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

AdamW::AdamW(const Model& model, const AdamWConfig& cfg) : cfg_(cfg) {
  const size_t n = model.numParams();
  master.resize(n);
  model.getParams(master.data());
  m.assign(n, 0.0f);
  v.assign(n, 0.0f);
  decay_.assign(n, 0);
  for (const auto& t : model.tensors())
    if (t.decay) std::fill(decay_.begin() + t.offset, decay_.begin() + t.offset + t.numel, 1);
  grad_.resize(n);
}

OptimStepResult AdamW::step(Model& model, double lr, double gradScale) {
  OptimStepResult r;
  const long long n = (long long)master.size();
  model.getGrads(grad_.data());
  float* g = grad_.data();
  const float inv = float(1.0 / gradScale);
  // Unscale; global norm in double over fixed chunks summed in order, so the norm
  // (and the clip factor) is bit-reproducible; any Inf/NaN makes the sum non-finite.
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
  if (!std::isfinite(sumsq)) {
    r.skipped = true;
    r.gradNorm = sumsq;
    return r;
  }
  r.gradNorm = std::sqrt(sumsq);
  const double clip =
      (cfg_.gradClip > 0 && r.gradNorm > cfg_.gradClip) ? cfg_.gradClip / (r.gradNorm + 1e-6) : 1.0;

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
  model.setParams(master.data());
  return r;
}

}  // namespace weft::train
