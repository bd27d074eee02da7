// Connection info survives serialization byte for byte, and a wrong magic,
// version or out-of-range field is refused with a reason.
#include <gtest/gtest.h>

#include <cstring>

#include "transports/ibverbs/conn_info.h"

namespace weft::ib {
namespace {

ConnInfo sample() {
  ConnInfo c;
  c.lid = 0x1234;
  for (int i = 0; i < 16; ++i) c.gid[i] = static_cast<uint8_t>(0xf0 + i);
  c.gid_index = 3;
  c.port = 2;
  c.mtu = 5;
  c.qpn = 0xabcdef;
  c.psn = 0x123456;
  c.ring_addr = 0x7f0012345678ull;
  c.ring_rkey = 0xdeadbeef;
  c.ring_slots = 64;
  c.ring_slot_bytes = 1 << 18;
  c.ring_context = 0x2a5;
  return c;
}

TEST(ConnInfo, RoundTripsEveryField) {
  uint8_t buf[kConnInfoBytes];
  serialize(sample(), buf);
  ConnInfo c;
  std::string why;
  ASSERT_TRUE(parse(buf, &c, &why)) << why;
  ConnInfo s = sample();
  EXPECT_EQ(c.lid, s.lid);
  EXPECT_EQ(0, std::memcmp(c.gid, s.gid, 16));
  EXPECT_EQ(c.gid_index, 3);
  EXPECT_EQ(c.port, 2);
  EXPECT_EQ(c.mtu, 5);
  EXPECT_EQ(c.qpn, s.qpn);
  EXPECT_EQ(c.psn, s.psn);
  EXPECT_EQ(c.ring_addr, s.ring_addr);
  EXPECT_EQ(c.ring_rkey, s.ring_rkey);
  EXPECT_EQ(c.ring_slots, 64u);
  EXPECT_EQ(c.ring_slot_bytes, 1u << 18);
  EXPECT_EQ(c.ring_context, 0x2a5u);
}

TEST(ConnInfo, LayoutIsLittleEndianAndFixed) {
  uint8_t buf[kConnInfoBytes];
  serialize(sample(), buf);
  EXPECT_EQ(buf[0], 0x57);  // magic "WWIB" low byte first
  EXPECT_EQ(buf[6], 0x34);  // lid low byte
  EXPECT_EQ(buf[7], 0x12);
  EXPECT_EQ(buf[28], 0xef);  // qpn low byte after gid and 4 single bytes
  EXPECT_EQ(buf[56], 0xa5);  // ring_context low byte, last field
  EXPECT_EQ(buf[57], 0x02);
}

TEST(ConnInfo, RefusesCorruptOrForeignInput) {
  uint8_t good[kConnInfoBytes];
  serialize(sample(), good);
  ConnInfo c;
  std::string why;
  uint8_t b[kConnInfoBytes];
  std::memcpy(b, good, sizeof b);
  b[0] ^= 1;
  EXPECT_FALSE(parse(b, &c, &why));
  EXPECT_NE(why.find("not weft"), std::string::npos);
  std::memcpy(b, good, sizeof b);
  b[4] = 9;
  EXPECT_FALSE(parse(b, &c, &why));
  EXPECT_NE(why.find("version 9"), std::string::npos) << why;
  ConnInfo bad = sample();
  bad.qpn = 1u << 24;
  serialize(bad, b);
  EXPECT_FALSE(parse(b, &c, &why));
  bad = sample();
  bad.mtu = 6;
  serialize(bad, b);
  EXPECT_FALSE(parse(b, &c, &why));
  bad = sample();
  bad.ring_slots = 0;
  serialize(bad, b);
  EXPECT_FALSE(parse(b, &c, &why));
  bad = sample();
  bad.ring_slot_bytes = 100;
  serialize(bad, b);
  EXPECT_FALSE(parse(b, &c, &why));
  EXPECT_NE(why.find("slot size 100"), std::string::npos) << why;
}

TEST(ConnInfo, CommonMtuIsTheSmaller) {
  EXPECT_EQ(common_mtu(5, 3), 3);
  EXPECT_EQ(common_mtu(1, 4), 1);
}

}  // namespace
}  // namespace weft::ib
