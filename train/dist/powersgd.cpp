#include "train/dist/powersgd.h"

#include <algorithm>
#include <cmath>

#include "train/matmul.h"
#include "train/rng.h"
#include "weft/weft.hpp"

namespace weft::train {

namespace {

// Gram-Schmidt on the r columns of a row-major n x r matrix (PyTorch's epsilon 0:
// a zero column stays zero rather than dividing by zero).
void orthogonalize(float* a, int n, int r) {
  for (int i = 0; i < r; i++) {
    double norm = 0;
    for (int k = 0; k < n; k++) norm += double(a[size_t(k) * r + i]) * a[size_t(k) * r + i];
    norm = std::sqrt(norm);
    if (norm > 0)
      for (int k = 0; k < n; k++) a[size_t(k) * r + i] = float(a[size_t(k) * r + i] / norm);
    for (int j = i + 1; j < r; j++) {
      double dot = 0;
      for (int k = 0; k < n; k++) dot += double(a[size_t(k) * r + i]) * a[size_t(k) * r + j];
      for (int k = 0; k < n; k++) a[size_t(k) * r + j] -= float(dot) * a[size_t(k) * r + i];
    }
  }
}

}  // namespace

PowerSgd::PowerSgd(const Model& model, int approxRank, bool errorFeedback, uint64_t seed)
    : r_(approxRank), errorFeedback_(errorFeedback) {
  for (const ParamTensor& t : model.tensors()) {
    const bool matrix = t.shape.size() == 2;
    const int64_t n = matrix ? t.shape[0] : 0, m = matrix ? t.shape[1] : 0;
    if (matrix && (n + m) * r_ * 2 < n * m) {
      matrices_.push_back(Matrix{t.offset, int(n), int(m), pSize_, qSize_});
      pSize_ += size_t(n) * size_t(r_);
      qSize_ += size_t(m) * size_t(r_);
    } else {
      plain_.emplace_back(t.offset, t.numel);
      uncompressed_ += t.numel;
    }
  }
  p_.resize(pSize_);
  q_.resize(qSize_);
  packed_.resize(uncompressed_);
  // The first Q: the same normal draws on every rank.
  Rng rng(seed);
  for (float& x : q_) x = float(rng.normal());
  error_.assign(model.numParams(), 0.0f);
}

size_t PowerSgd::reduce(weftComm_t comm, int ranks, float* g) {
  const size_t n = error_.size();
  for (size_t i = 0; i < n; i++) g[i] += error_[i];
  copy_.assign(g, g + n);
  // Uncompressed tensors, packed into one all-reduce.
  size_t at = 0;
  for (auto [off, cnt] : plain_) {
    std::copy(g + off, g + off + cnt, packed_.begin() + ptrdiff_t(at));
    at += cnt;
  }
  weft::check(weftAllReduce(packed_.data(), packed_.data(), packed_.size(), weftFloat32, weftSum, comm, nullptr), comm);
  at = 0;
  for (auto [off, cnt] : plain_) {
    std::copy(packed_.begin() + ptrdiff_t(at), packed_.begin() + ptrdiff_t(at + cnt), g + off);
    at += cnt;
  }
  // P = M Q (Q orthogonalized), summed; P orthogonalized; Q = M^T P, summed; M ~ P Q^T.
  for (const Matrix& x : matrices_) {
    orthogonalize(q_.data() + x.q, x.m, r_);
    gemm<float>(false, false, x.n, r_, x.m, g + x.offset, q_.data() + x.q, p_.data() + x.p, false);
  }
  weft::check(weftAllReduce(p_.data(), p_.data(), p_.size(), weftFloat32, weftSum, comm, nullptr), comm);
  for (const Matrix& x : matrices_) {
    orthogonalize(p_.data() + x.p, x.n, r_);
    gemm<float>(true, false, x.m, r_, x.n, g + x.offset, p_.data() + x.p, q_.data() + x.q, false);
  }
  weft::check(weftAllReduce(q_.data(), q_.data(), q_.size(), weftFloat32, weftSum, comm, nullptr), comm);
  for (const Matrix& x : matrices_)
    gemm<float>(false, true, x.n, x.m, r_, p_.data() + x.p, q_.data() + x.q, g + x.offset, false);
  // Error feedback: this rank's contribution minus its share of the result. A
  // non-finite gradient (an fp16 overflow, a skipped step) starts the error afresh.
  bool finite = true;
  for (size_t i = 0; i < n; i++) {
    error_[i] = copy_[i] - g[i] / float(ranks);
    finite = finite && std::isfinite(error_[i]);
  }
  if (!finite || !errorFeedback_) std::fill(error_.begin(), error_.end(), 0.0f);
  return bytesPerStep();
}

}  // namespace weft::train
