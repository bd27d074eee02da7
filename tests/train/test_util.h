#pragma once

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

}  // namespace weft::train::testing
