#include "transports/tcp/wire.h"

#include <cstdio>
#include <cstring>

namespace weft::tcp {

std::string check_hello(const Hello& h, const uint8_t secret[16], uint64_t comm_hash,
                        int expect_to, int nranks, int nsocks) {
  if (h.magic != kHelloMagic) return "not a weft TCP transport handshake";
  // Compare the whole secret even after a mismatch: no early exit to time.
  uint8_t diff = 0;
  for (size_t i = 0; i < sizeof h.secret; ++i) diff |= static_cast<uint8_t>(h.secret[i] ^ secret[i]);
  if (diff != 0) return "wrong job secret";
  char buf[160];
  if (h.comm_hash != comm_hash) {
    std::snprintf(buf, sizeof buf, "communicator %016llx, expected %016llx",
                  static_cast<unsigned long long>(h.comm_hash),
                  static_cast<unsigned long long>(comm_hash));
    return buf;
  }
  if (h.to_rank != expect_to || h.from_rank < 0 || h.from_rank >= nranks) {
    std::snprintf(buf, sizeof buf, "ranks %d -> %d, expected a rank in [0, %d) -> %d", h.from_rank,
                  h.to_rank, nranks, expect_to);
    return buf;
  }
  if (h.nsocks != nsocks || h.sock_index < 0 || h.sock_index >= nsocks) {
    std::snprintf(buf, sizeof buf, "socket %d of %d, expected one of %d (is WEFT_NSOCKS the same "
                  "on every rank?)", h.sock_index, h.nsocks, nsocks);
    return buf;
  }
  return {};
}

std::string check_frame(const FrameHeader& f, size_t max_slice) {
  char buf[200];
  if (f.magic == kCreditMagic || f.magic == kAskMagic)
    return f.slice_bytes == 0 ? std::string() : "malformed control frame";
  if (f.magic != kFrameMagic) {
    std::snprintf(buf, sizeof buf, "bad frame magic %#x", f.magic);
    return buf;
  }
  if (f.slice_bytes > max_slice || f.offset > f.msg_bytes || f.slice_bytes > f.msg_bytes - f.offset) {
    std::snprintf(buf, sizeof buf,
                  "malformed frame: %u bytes at offset %llu of a %llu-byte message (largest "
                  "slice %zu)",
                  f.slice_bytes, static_cast<unsigned long long>(f.offset),
                  static_cast<unsigned long long>(f.msg_bytes), max_slice);
    return buf;
  }
  return {};
}

}  // namespace weft::tcp
