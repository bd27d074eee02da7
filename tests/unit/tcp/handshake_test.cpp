// Connection set-up: the hello of every connection is checked; a stranger (no
// hello, wrong secret, wrong communicator, wrong rank) is closed and logged
// while the real peer still connects.
#include <sys/socket.h>
#include <unistd.h>

#include "helpers.h"

namespace weft::tcp::test {
namespace {

Options quiet() {
  Options o;
  o.nsocks = 2;
  o.dead_ms = 0;
  return o;
}

TEST(Handshake, CheckHelloAcceptsTheRightOneAndNamesEachFault) {
  Hello h{kHelloMagic, {}, kCommHash, 0, 1, 1, 2};
  std::memcpy(h.secret, kSecret, 16);
  EXPECT_EQ(check_hello(h, kSecret, kCommHash, 1, 2, 2), "");
  Hello bad = h;
  bad.magic = 0;
  EXPECT_NE(check_hello(bad, kSecret, kCommHash, 1, 2, 2), "");
  bad = h;
  bad.secret[15] ^= 1;
  EXPECT_EQ(check_hello(bad, kSecret, kCommHash, 1, 2, 2), "wrong job secret");
  bad = h;
  bad.comm_hash ^= 1;
  EXPECT_NE(check_hello(bad, kSecret, kCommHash, 1, 2, 2).find("communicator"), std::string::npos);
  bad = h;
  bad.to_rank = 0;
  EXPECT_NE(check_hello(bad, kSecret, kCommHash, 1, 2, 2).find("ranks"), std::string::npos);
  bad = h;
  bad.from_rank = 7;
  EXPECT_NE(check_hello(bad, kSecret, kCommHash, 1, 2, 2), "");
  bad = h;
  bad.sock_index = 2;
  EXPECT_NE(check_hello(bad, kSecret, kCommHash, 1, 2, 2).find("WEFT_NSOCKS"), std::string::npos);
  bad = h;
  bad.nsocks = 4;
  EXPECT_NE(check_hello(bad, kSecret, kCommHash, 1, 2, 2), "");
}

TEST(Handshake, PeerInfoRoundTripsIpv4AndIpv6) {
  for (const char* host : {"10.77.0.3", "fd00::1234"}) {
    boot::SockAddr a;
    ASSERT_TRUE(boot::parse_numeric(host, 4567, &a));
    boot::SockAddr b;
    ASSERT_TRUE(from_peer_info(to_peer_info(a), &b));
    EXPECT_EQ(b.str(), a.str());
  }
  PeerInfoTcp none{};
  boot::SockAddr b;
  EXPECT_FALSE(from_peer_info(none, &b));
}

// Connects to addr and sends `bytes`; returns the socket.
boot::Fd stranger(const boot::SockAddr& addr, const void* bytes, size_t n) {
  boot::Fd fd(::socket(addr.family(), SOCK_STREAM, 0));
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len), 0);
  if (n > 0) {
    EXPECT_EQ(::write(fd.get(), bytes, n), static_cast<ssize_t>(n));
  }
  return fd;
}

// The set-up closed the stranger: a read sees EOF (or a reset), never a reply.
void expect_closed(int fd) {
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  ssize_t n = ::read(fd, &c, 1);
  EXPECT_LE(n, 0) << "the stranger got a reply";
  if (n < 0) {
    EXPECT_NE(errno, EAGAIN) << "the stranger's connection was left open";
  }
}

TEST(Handshake, StrangersAreClosedAndTheRealPeerStillConnects) {
  std::vector<boot::Fd> strangers;
  Pair p;
  Status st = make_pair(&p, quiet(), "127.0.0.1", [&](const boot::SockAddr& at) {
    Hello h{kHelloMagic, {}, kCommHash, 0, 1, 0, 2};
    std::memcpy(h.secret, kSecret, 16);
    Hello wrong_secret = h;
    wrong_secret.secret[0] ^= 0x80;
    Hello wrong_comm = h;
    wrong_comm.comm_hash = 1;
    Hello wrong_rank = h;
    wrong_rank.to_rank = 0;
    const char garbage[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n....................";
    strangers.push_back(stranger(at, &wrong_secret, sizeof wrong_secret));
    strangers.push_back(stranger(at, &wrong_comm, sizeof wrong_comm));
    strangers.push_back(stranger(at, &wrong_rank, sizeof wrong_rank));
    strangers.push_back(stranger(at, garbage, sizeof(Hello)));
    strangers.push_back(stranger(at, &h, 10));  // a truncated hello, then silence
  });
  // The truncated one stays pending without blocking set-up; close it now.
  ASSERT_TRUE(st.ok()) << st.message();
  for (size_t i = 0; i + 1 < strangers.size(); ++i) expect_closed(strangers[i].get());
  uint32_t v = 0x5eed, got = 0;
  p.l0[0]->send(&v, 4, 1);
  transport::RecvOp op;
  op.tag = 1;
  op.bytes = 4;
  op.dst = &got;
  ASSERT_TRUE(recv_driven(p.l0[0].get(), p.l1[0].get(), op).ok());
  EXPECT_EQ(got, v);
}

TEST(Handshake, DifferentSecretsFailWithAnErrorNamingThePeer) {
  std::unique_ptr<TcpTransport> t0, t1;
  ASSERT_TRUE(TcpTransport::listen_at(loopback("127.0.0.1"), 0, 2, quiet(), &t0).ok());
  ASSERT_TRUE(TcpTransport::listen_at(loopback("127.0.0.1"), 1, 2, quiet(), &t1).ok());
  uint8_t other[16];
  std::memcpy(other, kSecret, 16);
  other[3] ^= 1;
  std::vector<std::unique_ptr<transport::Link>> l0, l1;
  Status s1;
  std::thread acceptor([&] {
    s1 = t1->connect(other, kCommHash, {{0, t0->info()}}, Deadline::after_ms(1500), &l1);
  });
  Status s0 = t0->connect(kSecret, kCommHash, {{1, t1->info()}}, Deadline::after_ms(1500), &l0);
  acceptor.join();
  EXPECT_FALSE(s0.ok());
  EXPECT_NE(s0.message().find("rank 1 at " + t1->address().str()), std::string::npos) << s0.message();
  EXPECT_EQ(s1.code(), weftTimeout);
  EXPECT_NE(s1.message().find("rank 0 at " + t0->address().str()), std::string::npos) << s1.message();
}

TEST(Handshake, MissingPeerTimesOutNamingIt) {
  std::unique_ptr<TcpTransport> t1;
  ASSERT_TRUE(TcpTransport::listen_at(loopback("127.0.0.1"), 1, 2, quiet(), &t1).ok());
  PeerInfoTcp ghost = to_peer_info(loopback("127.0.0.1"));
  ghost.port = 9;  // nobody listens
  std::vector<std::unique_ptr<transport::Link>> l1;
  Status st = t1->connect(kSecret, kCommHash, {{0, ghost}}, Deadline::after_ms(300), &l1);
  EXPECT_EQ(st.code(), weftTimeout);
  EXPECT_NE(st.message().find("rank 0 at 127.0.0.1:9 (0/2)"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace weft::tcp::test
