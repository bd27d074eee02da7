// A consumer that reads each piece only later, as an asynchronous data engine
// (a CUDA stream) does: consume() notes where the piece is and keeps it;
// released(), which the link polls, copies the kept pieces into `data` on its
// second call. A link that reuses a kept piece's memory (a FIFO slot, a bounce
// buffer, a ring slot, a sender's buffer) before then delivers wrong bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "transports/link.h"

namespace weft::testing {

// Bytes that never repeat with a slot's, a ring's or a FIFO's period, so memory
// refilled too early shows.
inline std::vector<unsigned char> noise(size_t n, uint32_t seed) {
  std::vector<unsigned char> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(x >> 24);
  }
  return v;
}

class DeferredConsumer final : public transport::Consumer {
 public:
  explicit DeferredConsumer(size_t bytes) : data(bytes) {}
  bool consume(const void* piece, size_t offset, size_t bytes) override {
    kept_.push_back({piece, offset, bytes});
    ++pieces;
    return false;
  }
  bool released() override {
    if (kept_.empty()) return true;
    if (!armed_) {
      armed_ = true;
      return false;
    }
    armed_ = false;
    for (const Kept& k : kept_) std::memcpy(data.data() + k.offset, k.piece, k.bytes);
    kept_.clear();
    return true;
  }
  std::vector<unsigned char> data;
  int pieces = 0;

 private:
  struct Kept {
    const void* piece;
    size_t offset, bytes;
  };
  std::vector<Kept> kept_;
  bool armed_ = false;
};

}  // namespace weft::testing
