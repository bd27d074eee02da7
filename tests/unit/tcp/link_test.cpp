// TcpLink over real loopback connections: sizes from 0 bytes to 48 MiB, plain
// and reducing receives, striping over several sockets, many messages queued
// before any is received, mismatched calls, and a peer that goes away.
#include <sys/socket.h>

#include "helpers.h"
#include "tests/unit/deferred_consumer.h"

namespace weft::tcp::test {
namespace {

// Records each piece: the consumer contract is "in order, by offset".
class Collect final : public transport::Consumer {
 public:
  explicit Collect(size_t n) : data(n) {}
  bool consume(const void* piece, size_t offset, size_t bytes) override {
    if (offset != next) in_order = false;
    if (offset % 8 != 0 || (bytes % 8 != 0 && offset + bytes != data.size())) aligned = false;
    std::memcpy(data.data() + offset, piece, bytes);
    next = offset + bytes;
    ++pieces;
    return true;
  }
  std::vector<unsigned char> data;
  size_t next = 0, pieces = 0;
  bool in_order = true, aligned = true;
};

Options opts_with(int nsocks) {
  Options o;
  o.nsocks = nsocks;
  o.dead_ms = 0;
  return o;
}

class LinkSizes : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(LinkSizes, PlainAndReducingReceivesGetEveryByte) {
  auto [nsocks, bytes] = GetParam();
  Pair p;
  ASSERT_TRUE(make_pair(&p, opts_with(nsocks)).ok());
  EXPECT_EQ(p.r0()->nsocks(), static_cast<size_t>(nsocks));
  auto msg = pattern(bytes, static_cast<unsigned>(bytes));
  for (int dir = 0; dir < 2; ++dir) {
    transport::Link* from = dir == 0 ? p.l0[0].get() : p.l1[0].get();
    transport::Link* to = dir == 0 ? p.l1[0].get() : p.l0[0].get();
    // Plain receive.
    uint64_t t = from->send(msg.data(), bytes, 77);
    std::vector<unsigned char> got(bytes + 1, 0xee);
    transport::RecvOp op;
    op.tag = 77;
    op.bytes = bytes;
    op.dst = got.data();
    Status st = recv_driven(from, to, op);
    ASSERT_TRUE(st.ok()) << st.message();
    while (!from->send_done(t)) {
    }
    EXPECT_TRUE(std::equal(msg.begin(), msg.end(), got.begin()));
    EXPECT_EQ(got[bytes], 0xee) << "wrote past the message";
    // Consumer receive.
    from->send(msg.data(), bytes, 78);
    Collect c(bytes);
    transport::RecvOp op2;
    op2.tag = 78;
    op2.bytes = bytes;
    op2.consumer = &c;
    st = recv_driven(from, to, op2);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(c.in_order);
    EXPECT_TRUE(c.aligned);
    EXPECT_EQ(c.next, bytes);
    EXPECT_TRUE(c.data == msg);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, LinkSizes,
                         ::testing::Combine(::testing::Values(1, 2, 4),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{40},
                                                              size_t{65536}, size_t{1000003},
                                                              size_t{48} << 20)));

TEST(TcpLink, ABounceBufferAConsumerKeepsIsNotRefilledUntilItIsRead) {
  // 3 MB in 256 KiB slices over 2 sockets: each socket's bounce buffer is
  // refilled several times.
  Pair p;
  Options o = opts_with(2);
  o.link.max_slice = 256 << 10;
  ASSERT_TRUE(make_pair(&p, o).ok());
  auto msg = pattern(3000017, 5);
  p.l0[0]->send(msg.data(), msg.size(), 9);
  weft::testing::DeferredConsumer c(msg.size());
  transport::RecvOp op;
  op.tag = 9;
  op.bytes = msg.size();
  op.consumer = &c;
  Status st = recv_driven(p.l0[0].get(), p.l1[0].get(), op);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_GE(c.pieces, 12);
  EXPECT_TRUE(c.data == msg);
}

TEST(TcpLink, ManyMessagesQueuedBeforeAnyReceive) {
  Pair p;
  ASSERT_TRUE(make_pair(&p, opts_with(3)).ok());
  std::vector<std::vector<unsigned char>> msgs;
  const size_t sizes[] = {0, 5, 200000, 64, 3 << 20, 0, 131072, 1};
  for (size_t i = 0; i < std::size(sizes); ++i) msgs.push_back(pattern(sizes[i], static_cast<unsigned>(i)));
  std::vector<uint64_t> tickets;
  for (size_t i = 0; i < msgs.size(); ++i)
    tickets.push_back(p.l0[0]->send(msgs[i].data(), msgs[i].size(), 100 + i));
  for (size_t i = 0; i < msgs.size(); ++i) {
    std::vector<unsigned char> got(msgs[i].size());
    transport::RecvOp op;
    op.tag = 100 + i;
    op.bytes = got.size();
    op.dst = got.data();
    Status st = recv_driven(p.l0[0].get(), p.l1[0].get(), op);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(got == msgs[i]) << "message " << i;
  }
  for (uint64_t t : tickets) EXPECT_TRUE(p.l0[0]->send_done(t));
}

// A receive from any source looks before it takes: peek names the next
// message (whichever socket its first frame came on) and leaves it whole.
TEST(TcpLink, PeekNamesTheNextMessageWithoutReceivingIt) {
  Pair p;
  ASSERT_TRUE(make_pair(&p, opts_with(3)).ok());
  transport::NextMessage next;
  ASSERT_TRUE(p.l1[0]->peek(&next).ok());
  EXPECT_FALSE(next.arrived);
  auto big = pattern(200000, 1), small = pattern(7, 2);
  p.l0[0]->send(big.data(), big.size(), 100);
  p.l0[0]->send(small.data(), small.size(), 101);
  for (const auto* m : {&big, &small}) {
    next = {};
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!next.arrived && std::chrono::steady_clock::now() < until) {
      p.l0[0]->progress();
      ASSERT_TRUE(p.l1[0]->peek(&next).ok());
    }
    ASSERT_TRUE(next.arrived);
    EXPECT_EQ(next.tag, m == &big ? 100u : 101u);
    EXPECT_EQ(next.bytes, m->size());
    transport::NextMessage again;
    ASSERT_TRUE(p.l1[0]->peek(&again).ok());
    EXPECT_TRUE(again.arrived && again.tag == next.tag && again.bytes == next.bytes);
    std::vector<unsigned char> got(m->size());
    transport::RecvOp op;
    op.tag = next.tag;
    op.bytes = got.size();
    op.dst = got.data();
    ASSERT_TRUE(recv_driven(p.l0[0].get(), p.l1[0].get(), op).ok());
    EXPECT_TRUE(got == *m);
  }
}

TEST(TcpLink, MismatchedSizeIsInvalidUsageNamingThePeer) {
  Pair p;
  ASSERT_TRUE(make_pair(&p, opts_with(2)).ok());
  std::vector<unsigned char> msg(100);
  p.l0[0]->send(msg.data(), msg.size(), 5);
  std::vector<unsigned char> got(64);
  transport::RecvOp op;
  op.tag = 5;
  op.bytes = 64;
  op.dst = got.data();
  Status st = recv_driven(p.l0[0].get(), p.l1[0].get(), op);
  EXPECT_EQ(st.code(), weftInvalidUsage);
  EXPECT_NE(st.message().find("mismatched calls"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
}

TEST(TcpLink, MismatchedTagIsInvalidUsage) {
  Pair p;
  ASSERT_TRUE(make_pair(&p, opts_with(1)).ok());
  uint32_t v = 1;
  p.l0[0]->send(&v, 4, 9);
  uint32_t got = 0;
  transport::RecvOp op;
  op.tag = 10;
  op.bytes = 4;
  op.dst = &got;
  Status st = recv_driven(p.l0[0].get(), p.l1[0].get(), op);
  EXPECT_EQ(st.code(), weftInvalidUsage) << st.message();
}

TEST(TcpLink, PeerCloseIsAnErrorNamingRankAndAddress) {
  Pair p;
  ASSERT_TRUE(make_pair(&p, opts_with(2)).ok());
  std::string addr = p.r1()->peer_addr();
  EXPECT_EQ(addr, p.t0->address().str());
  p.l0.clear();  // rank 0 goes away
  std::vector<unsigned char> got(1000);
  transport::RecvOp op;
  op.tag = 1;
  op.bytes = got.size();
  op.dst = got.data();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Status st;
  while (st.ok() && std::chrono::steady_clock::now() < until) {
    bool complete = false;
    st = p.l1[0]->poll_recv(op, &complete);
    ASSERT_FALSE(complete);
  }
  EXPECT_EQ(st.code(), weftRemoteError);
  EXPECT_NE(st.message().find("peer rank 0 at " + addr), std::string::npos) << st.message();
  EXPECT_FALSE(p.l1[0]->check_peer().ok());
}

TEST(TcpLink, CheckPeerSeesAClosedPeerWithoutAReceive) {
  Pair p;
  ASSERT_TRUE(make_pair(&p, opts_with(3)).ok());
  EXPECT_TRUE(p.l1[0]->check_peer().ok());
  p.l0.clear();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Status st;
  while (st.ok() && std::chrono::steady_clock::now() < until) st = p.l1[0]->check_peer();
  EXPECT_EQ(st.code(), weftRemoteError);
  EXPECT_NE(st.message().find("peer rank 0"), std::string::npos) << st.message();
}

TEST(TcpLink, SendToAClosedPeerFailsInCheckPeer) {
  Pair p;
  ASSERT_TRUE(make_pair(&p, opts_with(1)).ok());
  p.l1.clear();
  std::vector<unsigned char> big(16 << 20);
  uint64_t t = p.l0[0]->send(big.data(), big.size(), 3);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Status st;
  while (st.ok() && !p.l0[0]->send_done(t) && std::chrono::steady_clock::now() < until)
    st = p.l0[0]->check_peer();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("peer rank 1"), std::string::npos) << st.message();
}

TEST(TcpLink, WorksOverIpv6) {
  boot::SockAddr a;
  if (!boot::parse_numeric("::1", 0, &a)) GTEST_SKIP() << "no IPv6";
  boot::Fd probe(::socket(AF_INET6, SOCK_STREAM, 0));
  if (!probe.valid() || ::bind(probe.get(), reinterpret_cast<sockaddr*>(&a.ss), a.len) != 0)
    GTEST_SKIP() << "IPv6 loopback unavailable here";
  Pair p;
  Status st = make_pair(&p, opts_with(2), "::1");
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(p.r1()->peer_addr().rfind("[::1]:", 0), 0u) << p.r1()->peer_addr();
  auto msg = pattern(300000, 6);
  p.l1[0]->send(msg.data(), msg.size(), 4);
  std::vector<unsigned char> got(msg.size());
  transport::RecvOp op;
  op.tag = 4;
  op.bytes = got.size();
  op.dst = got.data();
  st = recv_driven(p.l1[0].get(), p.l0[0].get(), op);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(got == msg);
}

}  // namespace
}  // namespace weft::tcp::test
