// Training data: a byte-level tokenizer, the token-file format, corpus preparation
// from the Debian `fortunes` package, and a seeded batch sampler.
//
// Token file (little-endian):
//   offset 0   char[8]  magic "WEFTTOK\0"
//          8   u32      version (1)
//         12   u32      vocab size
//         16   u32      bytes per token (2)
//         20   u32      reserved (0)
//         24   u64      token count
//         32   u16[count] tokens
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/rng.h"

namespace weft::train {

// Byte-level tokenizer: token id = byte value, vocabulary 256.
struct ByteTokenizer {
  static constexpr int kVocab = 256;
  static std::vector<uint16_t> encode(const std::string& text);
  static std::string decode(const std::vector<int>& tokens);
};

struct TokenFile {
  uint32_t vocabSize = 0;
  std::vector<uint16_t> tokens;
};

constexpr uint32_t kTokenFileVersion = 1;
// Throws std::runtime_error with the path and cause on failure.
void writeTokenFile(const std::string& path, const TokenFile& f);
TokenFile readTokenFile(const std::string& path);

// Corpus from the Debian `fortunes`/`fortunes-min` packages: every regular file in
// srcDir (default /usr/share/games/fortunes) except *.dat indexes, *.u8 symlinks and
// the drawings in `art`/`ascii-art`, in name order. Cookies are the `%`-separated
// records; each goes to validation with probability valFraction, decided by a
// generator seeded with splitSeed (deterministic). Writes outDir/train.tok and
// outDir/val.tok; returns a one-line summary.
constexpr const char* kFortuneDir = "/usr/share/games/fortunes";
std::string prepareFortunes(const std::string& srcDir, const std::string& outDir,
                            double valFraction = 0.05, uint64_t splitSeed = 1234);

// Uniformly random windows of T+1 tokens: inputs [0,T), targets [1,T]. The position
// in the stream is the generator state, saved in checkpoints.
class BatchSampler {
 public:
  BatchSampler(const std::vector<uint16_t>* data, uint64_t seed) : data_(data), rng_(seed) {}
  void next(int B, int T, int* tokens, int* targets);
  // Advances exactly as next() does without reading the windows (another rank's
  // micro-batch under data parallelism).
  void skip(int B, int T);
  Rng& rng() { return rng_; }
  uint64_t batchesDrawn = 0;

 private:
  const std::vector<uint16_t>* data_;
  Rng rng_;
};

}  // namespace weft::train
