#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "train/data.h"
#include "train/trainer.h"

namespace weft::train::testing {

// A small repetitive English corpus: enough structure for the loss to fall quickly.
inline std::vector<uint16_t> syntheticCorpus(size_t bytes = 20000) {
  const char* lines[] = {"the quick brown fox jumps over the lazy dog.\n",
                         "a stitch in time saves nine.\n",
                         "all that glitters is not gold.\n",
                         "%\n",
                         "to be or not to be, that is the question.\n"};
  std::string s;
  for (size_t i = 0; s.size() < bytes; i++) s += lines[(i * 7 + i / 5) % 5];
  return ByteTokenizer::encode(s);
}

// This process's rank of a job started by a launcher (weft-run); nullptr after
// printing why when it cannot join.
inline weftComm_t joinJob(int* rank, int* world) {
  weftComm_t comm = nullptr;
  if (weftCommInitFromEnv(&comm, nullptr) != weftSuccess) {
    std::fprintf(stderr, "init: %s\n", weftGetLastError(nullptr));
    return nullptr;
  }
  weftCommUserRank(comm, rank);
  weftCommCount(comm, world);
  return comm;
}

inline TrainOptions tinyOptions(DType dt) {
  TrainOptions o;
  o.model = {256, 16, 2, 2, 32};
  o.dtype = dt;
  o.batch = 4;
  o.seq = 16;
  o.steps = 40;
  o.warmup = 4;
  o.lr = 3e-3;
  o.minLr = 3e-4;
  o.seed = 42;
  o.evalBatches = 4;
  return o;
}

// The parameters to compare (p: every parameter, widened): all but the key
// biases. A key bias adds the same q.b to every score of a query's row, which
// softmax ignores, so its gradient is zero in exact arithmetic and rounding noise
// in practice; Adam scales that noise to steps of size lr, so those elements
// follow the summation order (in any implementation), not the model.
inline std::vector<float> comparable(const Model& m, const std::vector<float>& p) {
  std::vector<float> out;
  const size_t C = size_t(m.config().channels);
  for (const ParamTensor& pt : m.tensors()) {
    const bool keyBias = pt.name.find("attn.c_attn.bias") != std::string::npos;
    for (size_t i = 0; i < pt.numel; i++)
      if (!keyBias || i < C || i >= 2 * C) out.push_back(p[pt.offset + i]);
  }
  return out;
}

// max |a - b| / max |b| (infinity norms): relative to the parameters' scale.
inline double relDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, m = 0;
  for (size_t i = 0; i < a.size(); i++) {
    d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
    m = std::max(m, std::fabs(double(b[i])));
  }
  return d / m;
}

}  // namespace weft::train::testing
