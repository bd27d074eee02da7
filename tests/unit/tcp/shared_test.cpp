// Several communicators (contexts) on one pair of connections, as split
// communicators share their family's: each gets exactly its own messages
// whatever the interleaving, a context nobody receives on is held to its
// window while another goes on, and a sender that gives up its buffers
// mid-frame leaves the connection usable for the others.
#include "helpers.h"

namespace weft::tcp::test {
namespace {

constexpr uint64_t kOther = 0x0ddba11ull;

// Both ends of a second context on the pair's connections.
struct Second {
  std::unique_ptr<TcpLink> s0, s1;  // rank 0's link to rank 1, and the reverse
};
Second second_context(Pair& p, const LinkOptions& lo) {
  Second s;
  s.s0 = std::make_unique<TcpLink>(1, p.r0()->connection(), kOther, lo);
  s.s1 = std::make_unique<TcpLink>(0, p.r1()->connection(), kOther, lo);
  return s;
}

Options small_slices(int nsocks) {
  Options o;
  o.nsocks = nsocks;
  o.dead_ms = 0;
  o.link.max_slice = 256 << 10;  // window: 4 x 256 KiB
  return o;
}

transport::RecvOp plain(uint64_t tag, std::vector<unsigned char>& dst) {
  transport::RecvOp op;
  op.tag = tag;
  op.bytes = dst.size();
  op.dst = dst.data();
  return op;
}

// Polls `to` until op completes while every sender in `from` moves.
Status drive(std::initializer_list<transport::Link*> from, transport::Link* to, transport::RecvOp& op) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    bool complete = false;
    WEFT_TRY(to->poll_recv(op, &complete));
    if (complete) return Status::Ok();
    for (transport::Link* l : from) l->progress();
    if (std::chrono::steady_clock::now() > until) return Error(weftTimeout, "test: receive timed out");
  }
}

TEST(SharedConnection, EachContextGetsExactlyItsOwnMessagesWhicheverIsReceivedFirst) {
  for (int nsocks : {1, 3}) {
    Pair p;
    Options o = small_slices(nsocks);
    ASSERT_TRUE(make_pair(&p, o).ok());
    Second s = second_context(p, o.link);
    auto a = pattern(3 << 20, 1), b = pattern(700001, 2), c = pattern(40, 3);
    // Other's big message goes first; the first context's two after it.
    s.s0->send(b.data(), b.size(), 5);
    p.l0[0]->send(a.data(), a.size(), 5);
    p.l0[0]->send(c.data(), c.size(), 6);
    std::vector<unsigned char> ga(a.size()), gb(b.size()), gc(c.size());
    auto opa = plain(5, ga), opc = plain(6, gc), opb = plain(5, gb);
    ASSERT_TRUE(drive({p.l0[0].get(), s.s0.get()}, p.l1[0].get(), opa).ok());
    ASSERT_TRUE(drive({p.l0[0].get(), s.s0.get()}, p.l1[0].get(), opc).ok());
    EXPECT_GT(p.r1()->connection()->aside_bytes(kOther), 0u) << "the other context's frames were in the way";
    ASSERT_TRUE(drive({p.l0[0].get(), s.s0.get()}, s.s1.get(), opb).ok());
    EXPECT_TRUE(ga == a) << nsocks;
    EXPECT_TRUE(gb == b) << nsocks;
    EXPECT_TRUE(gc == c) << nsocks;
    EXPECT_EQ(p.r1()->connection()->aside_bytes(kOther), 0u);
  }
}

TEST(SharedConnection, AReducingReceiveOfOneContextGetsItsBytesInOrderBesideAnother) {
  Pair p;
  Options o = small_slices(2);
  ASSERT_TRUE(make_pair(&p, o).ok());
  Second s = second_context(p, o.link);
  auto a = pattern(2000003, 7), b = pattern(1500000, 8);
  // Interleaved: each sender moves whenever the receiver polls.
  p.l0[0]->send(a.data(), a.size(), 1);
  s.s0->send(b.data(), b.size(), 1);
  weft::testing::DeferredConsumer ca(a.size());
  transport::RecvOp op;
  op.tag = 1;
  op.bytes = a.size();
  op.consumer = &ca;
  ASSERT_TRUE(drive({s.s0.get(), p.l0[0].get()}, p.l1[0].get(), op).ok());
  std::vector<unsigned char> gb(b.size());
  auto opb = plain(1, gb);
  ASSERT_TRUE(drive({s.s0.get(), p.l0[0].get()}, s.s1.get(), opb).ok());
  EXPECT_TRUE(ca.data == a);
  EXPECT_TRUE(gb == b);
}

TEST(SharedConnection, AContextNobodyReceivesOnIsHeldToItsWindowWhileAnotherGoesOn) {
  Pair p;
  Options o = small_slices(1);
  ASSERT_TRUE(make_pair(&p, o).ok());
  Second s = second_context(p, o.link);
  const size_t window = kWindowSlices * ((256 << 10) + sizeof(FrameHeader));
  auto big = pattern(32 << 20, 4), small = pattern(1 << 20, 5);
  uint64_t tb = s.s0->send(big.data(), big.size(), 9);
  for (int k = 0; k < 200; ++k) s.s0->progress();
  // The first context's message is behind the other's frames on the socket.
  p.l0[0]->send(small.data(), small.size(), 9);
  std::vector<unsigned char> gs(small.size());
  auto ops = plain(9, gs);
  ASSERT_TRUE(drive({s.s0.get(), p.l0[0].get()}, p.l1[0].get(), ops).ok());
  EXPECT_TRUE(gs == small);
  EXPECT_GT(p.r1()->connection()->aside_bytes(kOther), 0u);
  EXPECT_LE(p.r1()->connection()->aside_bytes(kOther), window);
  EXPECT_FALSE(s.s0->send_done(tb)) << "32 MiB cannot have gone with nobody receiving";
  std::vector<unsigned char> gb(big.size());
  auto opb = plain(9, gb);
  ASSERT_TRUE(drive({s.s0.get(), p.l0[0].get()}, s.s1.get(), opb).ok());
  EXPECT_TRUE(gb == big);
  while (!s.s0->send_done(tb)) {
  }
}

TEST(SharedConnection, ASenderThatGivesUpMidFrameLeavesTheConnectionToTheOthers) {
  Pair p;
  Options o = small_slices(1);
  o.buf_bytes = 65536;  // small socket buffers: a 256 KiB frame goes in parts
  ASSERT_TRUE(make_pair(&p, o).ok());
  Second s = second_context(p, o.link);
  auto doomed = std::make_unique<std::vector<unsigned char>>(pattern(4 << 20, 6));
  s.s0->send(doomed->data(), doomed->size(), 3);
  for (int k = 0; k < 100; ++k) s.s0->progress();
  // Its call failed: the link gives the buffer up, which is then overwritten.
  s.s0->abandon_sends();
  std::fill(doomed->begin(), doomed->end(), 0xab);
  doomed.reset();
  s.s1.reset();  // the receiver's communicator goes too: its frames are dropped
  s.s0.reset();
  auto a = pattern(3 << 20, 7);
  p.l0[0]->send(a.data(), a.size(), 4);
  std::vector<unsigned char> ga(a.size());
  auto op = plain(4, ga);
  Status st = drive({p.l0[0].get()}, p.l1[0].get(), op);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(ga == a);
}

TEST(SharedConnection, ClosingAContextMidFrameWithoutGivingUpItsBufferFailsTheConnection) {
  Pair p;
  Options o = small_slices(1);
  o.buf_bytes = 65536;
  ASSERT_TRUE(make_pair(&p, o).ok());
  Second s = second_context(p, o.link);
  auto big = pattern(4 << 20, 8);
  s.s0->send(big.data(), big.size(), 3);
  for (int k = 0; k < 100; ++k) s.s0->progress();
  s.s0.reset();  // no abandon_sends: the frame it started cannot be finished
  Status st = p.l0[0]->check_peer();
  EXPECT_EQ(st.code(), weftInternalError) << st.message();
  EXPECT_NE(st.message().find("in the middle of a frame"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace weft::tcp::test
