// A receive's consumer for the link fuzz targets: keeps what it is handed and
// stops the run (a crash the fuzzer reports) when a piece lies outside the message.
#pragma once

#include <cstring>
#include <vector>

#include "transports/link.h"

namespace weft::fuzz {

class Sink final : public transport::Consumer {
 public:
  explicit Sink(size_t bytes) : seen(bytes, 0) {}
  bool consume(const void* piece, size_t offset, size_t bytes) override {
    if (offset > seen.size() || bytes > seen.size() - offset) __builtin_trap();
    if (bytes > 0) std::memcpy(seen.data() + offset, piece, bytes);  // an empty message's vector has no data()
    return true;
  }
  bool released() override { return true; }
  std::vector<unsigned char> seen;
};

}  // namespace weft::fuzz
