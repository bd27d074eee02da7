// A receive for the link fuzz targets, straight into a buffer or through a
// consumer that keeps what it is handed and stops the run (a crash the fuzzer
// reports) when a piece lies outside the message.
#pragma once

#include <cstdint>
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

// A receive of `bytes` with `tag`; through the Sink when `consumer`. Not movable:
// op points into it.
struct Receive {
  Receive(size_t bytes, uint64_t tag, bool consumer) : dst(bytes), sink(bytes) {
    op.tag = tag;
    op.bytes = bytes;
    if (consumer) op.consumer = &sink;
    else op.dst = dst.data();
  }
  Receive(const Receive&) = delete;
  Receive& operator=(const Receive&) = delete;
  std::vector<unsigned char> dst;
  Sink sink;
  transport::RecvOp op;
};

}  // namespace weft::fuzz
