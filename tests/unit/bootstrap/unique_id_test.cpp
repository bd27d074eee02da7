// Unique id packing, secrets, address parsing and the interface filter rules.
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>

#include "bootstrap/interfaces.h"
#include "bootstrap/socket.h"
#include "tests/unit/bootstrap/helpers.h"

namespace weft::boot::test {
namespace {

TEST(UniqueId, PackUnpackRoundTrip) {
  for (const char* host : {"10.20.30.40", "::1", "fd00:1234:5678::abcd"}) {
    UniqueId id{};
    std::strcpy(id.host, host);
    id.port = 29500;
    id.secret = random_secret();
    weftUniqueId packed;
    pack(id, &packed);
    UniqueId back{};
    Status st = unpack(packed, &back);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_STREQ(back.host, host);
    EXPECT_EQ(back.port, 29500);
    EXPECT_EQ(secret_hex(back.secret), secret_hex(id.secret));
  }
}

TEST(UniqueId, UnpackRejectsGarbage) {
  weftUniqueId zero;
  std::memset(&zero, 0, sizeof zero);
  UniqueId out;
  EXPECT_EQ(unpack(zero, &out).code(), weftInvalidArgument);
  UniqueId id{};
  std::strcpy(id.host, "127.0.0.1");
  id.port = 1;
  weftUniqueId packed;
  pack(id, &packed);
  packed.internal[4] ^= 0x7f;  // version
  EXPECT_EQ(unpack(packed, &out).code(), weftInvalidUsage);
}

TEST(Secret, HexRoundTripAndValidation) {
  Secret s = random_secret();
  std::string hex = secret_hex(s);
  EXPECT_EQ(hex.size(), 32u);
  Secret back{};
  ASSERT_TRUE(parse_secret_hex(hex, &back));
  EXPECT_EQ(std::memcmp(s.bytes, back.bytes, 16), 0);
  EXPECT_TRUE(parse_secret_hex("00112233445566778899AABBCCDDEEFF", &back));
  EXPECT_EQ(back.bytes[15], 0xff);
  EXPECT_FALSE(parse_secret_hex("0011", &back));
  EXPECT_FALSE(parse_secret_hex("g0112233445566778899aabbccddeeff", &back));
  EXPECT_NE(secret_hex(random_secret()), secret_hex(random_secret()));
}

TEST(Secret, DerivedIsDeterministic) {
  EXPECT_EQ(secret_hex(derive_secret("job", "h:1")), secret_hex(derive_secret("job", "h:1")));
  EXPECT_NE(secret_hex(derive_secret("job", "h:1")), secret_hex(derive_secret("job", "h:2")));
  EXPECT_NE(secret_hex(derive_secret("job1", "h:1")), secret_hex(derive_secret("job2", "h:1")));
}

TEST(Address, SplitHostPort) {
  std::string h;
  uint16_t p = 0;
  ASSERT_TRUE(split_host_port("node7:29500", &h, &p));
  EXPECT_EQ(h, "node7");
  EXPECT_EQ(p, 29500);
  ASSERT_TRUE(split_host_port("[fe80::1%eth0]:80", &h, &p));
  EXPECT_EQ(h, "fe80::1%eth0");
  EXPECT_EQ(p, 80);
  EXPECT_FALSE(split_host_port("::1:80", &h, &p));  // unbracketed IPv6
  EXPECT_FALSE(split_host_port("host", &h, &p));
  EXPECT_FALSE(split_host_port("host:", &h, &p));
  EXPECT_FALSE(split_host_port("host:70000", &h, &p));
  EXPECT_FALSE(split_host_port("[::1]80", &h, &p));
}

TEST(Address, ResolveAndFormat) {
  SockAddr a;
  ASSERT_TRUE(resolve("127.0.0.1", 5, &a).ok());
  EXPECT_EQ(a.str(), "127.0.0.1:5");
  ASSERT_TRUE(resolve("::1", 6, &a).ok());
  EXPECT_EQ(a.str(), "[::1]:6");
  ASSERT_TRUE(resolve("localhost", 7, &a).ok());
  EXPECT_EQ(a.port(), 7);
  EXPECT_FALSE(resolve("no-such-host.invalid", 7, &a).ok());
}

TEST(Interfaces, NcclStyleFilter) {
  EXPECT_TRUE(ifname_matches("", "eth0"));
  EXPECT_TRUE(ifname_matches("eth", "eth0"));
  EXPECT_TRUE(ifname_matches("eth0", "eth0"));
  EXPECT_TRUE(ifname_matches("eth0", "eth01"));  // prefix
  EXPECT_FALSE(ifname_matches("=eth0", "eth01"));
  EXPECT_TRUE(ifname_matches("=eth0", "eth0"));
  EXPECT_TRUE(ifname_matches("ib,eth", "ib0"));
  EXPECT_FALSE(ifname_matches("ib,eth", "enp1s0"));
  EXPECT_FALSE(ifname_matches("^docker,lo", "docker0"));
  EXPECT_FALSE(ifname_matches("^docker,lo", "lo"));
  EXPECT_TRUE(ifname_matches("^docker,lo", "eth0"));
  EXPECT_TRUE(ifname_matches("^=eth0", "eth01"));
  EXPECT_FALSE(ifname_matches("^=eth0", "eth0"));
}

Interface itf(const char* name, const char* addr, bool loopback = false) {
  Interface i;
  i.name = name;
  i.loopback = loopback;
  EXPECT_TRUE(parse_numeric(addr, 0, &i.addr));
  return i;
}

TEST(Interfaces, PickPolicy) {
  std::vector<Interface> all = {itf("lo", "127.0.0.1", true), itf("docker0", "172.17.0.1"),
                                itf("veth12", "169.254.3.3"), itf("eth0", "fd00::5"),
                                itf("eth0", "10.0.0.5"), itf("ib0", "192.168.1.5")};
  Interface got;
  ASSERT_TRUE(pick_interface(all, "", &got));
  EXPECT_EQ(got.name, "eth0");
  EXPECT_EQ(got.addr.host(), "10.0.0.5");  // IPv4 preferred on the same interface
  ASSERT_TRUE(pick_interface(all, "ib", &got));
  EXPECT_EQ(got.name, "ib0");
  ASSERT_TRUE(pick_interface(all, "=docker0", &got));
  EXPECT_EQ(got.name, "docker0");
  ASSERT_TRUE(pick_interface(all, "^lo,docker,veth,eth", &got));
  EXPECT_EQ(got.name, "ib0");
  EXPECT_FALSE(pick_interface(all, "=wlan0", &got));
  // Only a veth besides loopback (a network namespace): the veth.
  std::vector<Interface> ns = {itf("lo", "127.0.0.1", true), itf("veth-ns1", "10.9.0.2")};
  ASSERT_TRUE(pick_interface(ns, "", &got));
  EXPECT_EQ(got.name, "veth-ns1");
  // Nothing but loopback and docker: loopback, IPv4 first.
  std::vector<Interface> bare = {itf("docker0", "172.17.0.1"), itf("lo", "::1", true),
                                 itf("lo", "127.0.0.1", true)};
  ASSERT_TRUE(pick_interface(bare, "", &got));
  EXPECT_EQ(got.addr.host(), "127.0.0.1");
}

TEST(Interfaces, ListHasLoopback) {
  std::vector<Interface> all;
  ASSERT_TRUE(list_interfaces(&all).ok());
  bool lo = false;
  for (const auto& i : all) lo |= i.loopback;
  EXPECT_TRUE(lo);
}

}  // namespace
}  // namespace weft::boot::test
