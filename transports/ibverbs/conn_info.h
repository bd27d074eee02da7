// What two ranks exchange through the bootstrap to connect a reliable-connected
// queue pair: address of the port (LID for InfiniBand, GID for RoCE), queue
// pair number, first packet sequence number, path MTU, and where the peer may
// RDMA-write (the receive ring) with its key. A fixed little-endian layout with
// a magic and version, so that a mismatched build is refused, not misread.
// A communicator sharing its family's queue pair sends the same address with
// its own ring and context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::ib {

struct ConnInfo {
  uint16_t lid = 0;
  uint8_t gid[16] = {};
  uint8_t gid_index = 0;
  uint8_t port = 1;
  uint8_t mtu = 0;        // enum ibv_mtu: 1 = 256 B ... 5 = 4096 B
  uint32_t qpn = 0;       // 24 bits used
  uint32_t psn = 0;       // 24 bits used
  uint64_t ring_addr = 0; // receive ring the peer writes into
  uint32_t ring_rkey = 0;
  uint32_t ring_slots = 0;
  uint32_t ring_slot_bytes = 0;  // header included; a multiple of 64
  uint32_t ring_context = 0;     // the context index writes to the ring carry
};

inline constexpr size_t kConnInfoBytes = 60;

// Writes exactly kConnInfoBytes.
void serialize(const ConnInfo& c, uint8_t out[kConnInfoBytes]);
// Reads what serialize wrote; false with *why set for a wrong magic/version or
// out-of-range fields (qpn/psn above 24 bits, mtu outside 1..5, no slots, a slot size
// that is not a multiple of 64 of at least 128 bytes).
bool parse(const uint8_t in[kConnInfoBytes], ConnInfo* out, std::string* why);

// The MTU both ends can use: the smaller of the two.
uint8_t common_mtu(uint8_t a, uint8_t b);

}  // namespace weft::ib
