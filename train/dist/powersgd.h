// PowerSGD gradient compression (Vogels et al. 2019) with the semantics of
// PyTorch's powerSGD_hook: every 2-D gradient M (n x m) worth compressing,
// (n + m) r * 2 < n m, travels as rank-r factors P = M Q (n x r) and Q = M^T P
// (m x r), with P orthogonalized between the two all-reduces and Q kept from step
// to step (warm start); everything else is all-reduced as is; each rank keeps the
// error of its own contribution (local gradient minus its share of the result) and
// adds it to the next step's gradient (error feedback).
#pragma once

#include <cstdint>
#include <vector>

#include "train/gpt2.h"
#include "weft/weft.h"

namespace weft::train {

class PowerSgd {
 public:
  PowerSgd(const Model& model, int approxRank, bool errorFeedback, uint64_t seed);

  // g: every gradient element, fp32, this rank's contribution pre-scaled so that
  // the sum over ranks is the result. Replaced by the (approximate) sum. Returns
  // the bytes handed to weft's all-reduces.
  size_t reduce(weftComm_t comm, int ranks, float* g);

  // Bytes one step communicates (input of the all-reduces), and uncompressed.
  size_t bytesPerStep() const { return (uncompressed_ + pSize_ + qSize_) * sizeof(float); }

 private:
  struct Matrix {
    size_t offset;  // into the flat gradient
    int n, m;
    size_t p, q;    // offsets of its factors in p_ and q_
  };
  int r_;  // approximation rank
  bool errorFeedback_;
  std::vector<Matrix> matrices_;
  std::vector<std::pair<size_t, size_t>> plain_;  // (offset, count) sent as is
  size_t uncompressed_ = 0, pSize_ = 0, qSize_ = 0;
  std::vector<float> p_, q_, packed_, error_, copy_;
};

}  // namespace weft::train
