#include "transports/ibverbs/conn_info.h"

#include <cstring>

namespace weft::ib {
namespace {

constexpr uint32_t kMagic = 0x42495757u;  // "WWIB"
constexpr uint16_t kVersion = 3;

// Little-endian writer/reader over a fixed buffer.
struct Out {
  uint8_t* p;
  void u8(uint8_t v) { *p++ = v; }
  void u16(uint16_t v) { for (int i = 0; i < 2; ++i) *p++ = static_cast<uint8_t>(v >> (8 * i)); }
  void u32(uint32_t v) { for (int i = 0; i < 4; ++i) *p++ = static_cast<uint8_t>(v >> (8 * i)); }
  void u64(uint64_t v) { for (int i = 0; i < 8; ++i) *p++ = static_cast<uint8_t>(v >> (8 * i)); }
  void bytes(const uint8_t* b, size_t n) { std::memcpy(p, b, n), p += n; }
};
struct In {
  const uint8_t* p;
  uint8_t u8() { return *p++; }
  uint16_t u16() { uint16_t v = 0; for (int i = 0; i < 2; ++i) v |= static_cast<uint16_t>(*p++ << (8 * i)); return v; }
  uint32_t u32() { uint32_t v = 0; for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(*p++) << (8 * i); return v; }
  uint64_t u64() { uint64_t v = 0; for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(*p++) << (8 * i); return v; }
  void bytes(uint8_t* b, size_t n) { std::memcpy(b, p, n), p += n; }
};

}  // namespace

// Layout: magic u32, version u16, lid u16, gid[16], gid_index, port, mtu, pad,
// qpn u32, psn u32, ring_addr u64, ring_rkey u32, ring_slots u32, ring_slot_bytes u32,
// ring_context u32 = 60 bytes.
void serialize(const ConnInfo& c, uint8_t out[kConnInfoBytes]) {
  Out w{out};
  w.u32(kMagic);
  w.u16(kVersion);
  w.u16(c.lid);
  w.bytes(c.gid, 16);
  w.u8(c.gid_index);
  w.u8(c.port);
  w.u8(c.mtu);
  w.u8(0);
  w.u32(c.qpn);
  w.u32(c.psn);
  w.u64(c.ring_addr);
  w.u32(c.ring_rkey);
  w.u32(c.ring_slots);
  w.u32(c.ring_slot_bytes);
  w.u32(c.ring_context);
}

bool parse(const uint8_t in[kConnInfoBytes], ConnInfo* out, std::string* why) {
  In r{in};
  if (r.u32() != kMagic) return *why = "not weft ibverbs connection info", false;
  uint16_t version = r.u16();
  if (version != kVersion)
    return *why = "connection info version " + std::to_string(version) + ", expected " +
                  std::to_string(kVersion) + " (mixed weft builds?)",
           false;
  ConnInfo c;
  c.lid = r.u16();
  r.bytes(c.gid, 16);
  c.gid_index = r.u8();
  c.port = r.u8();
  c.mtu = r.u8();
  (void)r.u8();
  c.qpn = r.u32();
  c.psn = r.u32();
  c.ring_addr = r.u64();
  c.ring_rkey = r.u32();
  c.ring_slots = r.u32();
  c.ring_slot_bytes = r.u32();
  c.ring_context = r.u32();
  if (c.qpn >= (1u << 24) || c.psn >= (1u << 24)) return *why = "queue pair number or PSN above 24 bits", false;
  if (c.mtu < 1 || c.mtu > 5) return *why = "path MTU code " + std::to_string(c.mtu) + " outside 1..5", false;
  if (c.ring_slots == 0) return *why = "a receive ring without slots", false;
  if (c.ring_slot_bytes < 128 || c.ring_slot_bytes % 64 != 0)
    return *why = "ring slot size " + std::to_string(c.ring_slot_bytes) +
                  " is not a multiple of 64 of at least 128 bytes",
           false;
  *out = c;
  return true;
}

uint8_t common_mtu(uint8_t a, uint8_t b) { return a < b ? a : b; }

}  // namespace weft::ib
