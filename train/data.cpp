#include "train/data.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace weft::train {

namespace fs = std::filesystem;

std::vector<uint16_t> ByteTokenizer::encode(const std::string& text) {
  std::vector<uint16_t> out(text.size());
  for (size_t i = 0; i < text.size(); i++) out[i] = uint8_t(text[i]);
  return out;
}

std::string ByteTokenizer::decode(const std::vector<int>& tokens) {
  std::string s;
  s.reserve(tokens.size());
  for (int t : tokens) s.push_back(char(uint8_t(t)));
  return s;
}

namespace {
constexpr char kMagic[8] = {'W', 'E', 'F', 'T', 'T', 'O', 'K', '\0'};

template <class U> void putLE(std::string& s, U v) {
  for (size_t i = 0; i < sizeof(U); i++) s.push_back(char(uint8_t(uint64_t(v) >> (8 * i))));
}
template <class U> U getLE(const unsigned char* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(U); i++) v |= uint64_t(p[i]) << (8 * i);
  return U(v);
}
}  // namespace

void writeTokenFile(const std::string& path, const TokenFile& f) {
  std::string h(kMagic, 8);
  putLE<uint32_t>(h, kTokenFileVersion);
  putLE<uint32_t>(h, f.vocabSize);
  putLE<uint32_t>(h, 2);
  putLE<uint32_t>(h, 0);
  putLE<uint64_t>(h, f.tokens.size());
  for (uint16_t t : f.tokens) putLE<uint16_t>(h, t);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    if (!o) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
    o.write(h.data(), std::streamsize(h.size()));
    if (!o) throw std::runtime_error("write failed: " + tmp);
  }
  fs::rename(tmp, path);
}

TokenFile readTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open token file " + path + ": " + std::strerror(errno));
  std::string buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* p = reinterpret_cast<const unsigned char*>(buf.data());
  if (buf.size() < 32 || std::memcmp(p, kMagic, 8) != 0)
    throw std::runtime_error(path + ": not a weft token file (bad magic)");
  const uint32_t version = getLE<uint32_t>(p + 8);
  if (version != kTokenFileVersion)
    throw std::runtime_error(path + ": unsupported token file version " + std::to_string(version));
  TokenFile f;
  f.vocabSize = getLE<uint32_t>(p + 12);
  const uint32_t width = getLE<uint32_t>(p + 16);
  const uint64_t count = getLE<uint64_t>(p + 24);
  if (width != 2) throw std::runtime_error(path + ": unsupported token width " + std::to_string(width));
  if (buf.size() != 32 + count * 2)
    throw std::runtime_error(path + ": size " + std::to_string(buf.size()) + " does not match header count " +
                             std::to_string(count));
  f.tokens.resize(count);
  for (uint64_t i = 0; i < count; i++) {
    f.tokens[i] = getLE<uint16_t>(p + 32 + 2 * i);
    if (f.tokens[i] >= f.vocabSize) throw std::runtime_error(path + ": token id beyond vocab size");
  }
  return f;
}

std::string prepareFortunes(const std::string& srcDir, const std::string& outDir, double valFraction,
                            uint64_t splitSeed) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(srcDir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || e.is_symlink()) continue;
    if (name.ends_with(".dat") || name.ends_with(".u8") || name == "art" || name == "ascii-art") continue;
    files.push_back(e.path());
  }
  if (ec) throw std::runtime_error("cannot read " + srcDir + ": " + ec.message());
  if (files.empty())
    throw std::runtime_error("no fortune files in " + srcDir + " (Debian: apt-get install fortunes)");
  std::sort(files.begin(), files.end());

  Rng rng(splitSeed);
  TokenFile train, val;
  train.vocabSize = val.vocabSize = ByteTokenizer::kVocab;
  size_t cookies = 0, valCookies = 0;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str(), cookie, line;
    std::istringstream lines(text);
    auto flush = [&] {
      if (cookie.empty()) return;
      cookie += "%\n";
      const bool toVal = rng.uniform() < valFraction;
      auto toks = ByteTokenizer::encode(cookie);
      auto& dst = toVal ? val.tokens : train.tokens;
      dst.insert(dst.end(), toks.begin(), toks.end());
      cookies++;
      valCookies += toVal;
      cookie.clear();
    };
    while (std::getline(lines, line)) {
      if (line == "%") flush();
      else cookie += line + "\n";
    }
    flush();
  }
  fs::create_directories(outDir);
  writeTokenFile((fs::path(outDir) / "train.tok").string(), train);
  writeTokenFile((fs::path(outDir) / "val.tok").string(), val);
  std::ostringstream msg;
  msg << files.size() << " files, " << cookies << " cookies (" << valCookies << " val), "
      << train.tokens.size() << " train / " << val.tokens.size() << " val tokens -> " << outDir;
  return msg.str();
}

void BatchSampler::next(int B, int T, int* tokens, int* targets) {
  const uint64_t n = data_->size();
  if (n < uint64_t(T) + 2) throw std::runtime_error("token stream shorter than one window");
  for (int b = 0; b < B; b++) {
    const uint64_t off = rng_.below(n - uint64_t(T));
    for (int t = 0; t < T; t++) {
      tokens[b * T + t] = (*data_)[off + t];
      targets[b * T + t] = (*data_)[off + t + 1];
    }
  }
  batchesDrawn++;
}

void BatchSampler::skip(int B, int T) {
  const uint64_t n = data_->size();
  if (n < uint64_t(T) + 2) throw std::runtime_error("token stream shorter than one window");
  for (int b = 0; b < B; b++) rng_.below(n - uint64_t(T));
  batchesDrawn++;
}

}  // namespace weft::train
