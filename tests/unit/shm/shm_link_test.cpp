// The shared-memory link in one process: two "ranks" with their own segments,
// driven from one thread (sends never block, so the test interleaves sender
// progress and receiver polls). Cross-memory attach works on our own pid.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <algorithm>

#include "base/params.h"
#include "tests/unit/deferred_consumer.h"
#include "transports/shm/memalloc.h"
#include "transports/shm/shm_link.h"
#include "transports/shm/shm_transport.h"

namespace weft::shm {
namespace {

struct Pair {
  std::shared_ptr<ShmTransport> t0, t1;
  std::vector<std::unique_ptr<transport::Link>> l0, l1;  // l0[i]: 0 -> 1, l1[i]: 1 -> 0, context i

  // cma: ordinary buffers above the eager limit are read with cross-memory
  // attach; else they cross the FIFO (weftMemAlloc buffers are mapped either way).
  explicit Pair(bool cma) {
    std::string prefix = "/weft-unittest-" + std::to_string(getpid()) + (cma ? "-c" : "-n");
    std::vector<LocalPeer> local = {{0, getpid(), cma_probe_address()},
                                    {1, getpid(), cma_probe_address()}};
    EXPECT_TRUE(ShmTransport::create(prefix, 0, local, &t0).ok());
    EXPECT_TRUE(ShmTransport::create(prefix, 1, local, &t1).ok());
    EXPECT_TRUE(t0->connect(cma).ok());
    EXPECT_TRUE(t1->connect(cma).ok());
    t0->unlink();
    t1->unlink();
    add_context();
  }
  // Another communicator of the family on the same channels: each side opens
  // a receiving context and the other writes to it (as init exchanges them).
  void add_context() {
    uint32_t in0 = t0->channel(1)->open_in(), in1 = t1->channel(0)->open_in();
    l0.push_back(t0->link(1, 1, in1, in0));
    l1.push_back(t1->link(0, 0, in0, in1));
  }
};

class Summer final : public transport::Consumer {
 public:
  explicit Summer(std::vector<unsigned char>* out) : out_(out) {}
  bool consume(const void* piece, size_t offset, size_t bytes) override {
    const auto* p = static_cast<const unsigned char*>(piece);
    for (size_t i = 0; i < bytes; ++i) (*out_)[offset + i] += p[i];
    ++pieces;
    return true;
  }
  int pieces = 0;

 private:
  std::vector<unsigned char>* out_;
};

// Sends `data` from link `tx` and receives it through `op` on `rx`.
Status transfer(transport::Link* tx, transport::Link* rx, const void* data, size_t bytes,
                transport::RecvOp& op, uint64_t tag) {
  uint64_t ticket = tx->send(data, bytes, tag);
  op.tag = tag;
  op.bytes = bytes;
  for (int spins = 0; spins < 10000000; ++spins) {
    bool done = false;
    Status st = rx->poll_recv(op, &done);
    if (!st.ok()) return st;
    tx->progress();
    if (done) {
      while (!tx->send_done(ticket)) {
      }
      return Status::Ok();
    }
  }
  return Error(weftTimeout, "transfer did not complete");
}

std::vector<unsigned char> pattern(size_t n, int seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 31 + seed) & 0xff);
  return v;
}

// A message of three slots crosses the FIFO with the stores chosen by timing:
// the first full slot cached, the second streamed (slot_copy.h); the receiver
// publishes what reading each kind cost it, and the payload arrives whole.
TEST(ShmLink, TheReaderPublishesWhatTimedSlotsCostIt) {
  Pair p(false);
  PeerChannel* rx = p.t1->channel(0);
  ASSERT_EQ(0.0, rx->read_cost(false));
  ASSERT_EQ(0.0, rx->read_cost(true));
  const size_t bytes = 3 * static_cast<size_t>(params::SHM_SLOT_BYTES());
  auto data = pattern(bytes, 5);
  std::vector<unsigned char> out(bytes, 0);
  transport::RecvOp op;
  op.dst = out.data();
  ASSERT_TRUE(transfer(p.l0[0].get(), p.l1[0].get(), data.data(), bytes, op, 3).ok());
  EXPECT_EQ(data, out);
  if (params::SHM_STREAM() == -1) {
    EXPECT_GT(rx->read_cost(false), 0.0);
    EXPECT_GT(rx->read_cost(true), 0.0);
  } else {  // WEFT_SHM_STREAM=0 or 1 (unit-shm-streaming): fixed stores, nothing timed
    EXPECT_EQ(0.0, rx->read_cost(false));
    EXPECT_EQ(0.0, rx->read_cost(true));
  }
}

class ShmLinkSizes : public ::testing::TestWithParam<std::tuple<bool, size_t>> {};

TEST_P(ShmLinkSizes, PlainReceiveDeliversEveryByte) {
  auto [cma, bytes] = GetParam();
  Pair p(cma);
  auto data = pattern(bytes, 7);
  std::vector<unsigned char> out(bytes + 1, 0xEE);
  transport::RecvOp op;
  op.dst = out.data();
  ASSERT_TRUE(transfer(p.l0[0].get(), p.l1[0].get(), data.data(), bytes, op, 42).ok());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), out.begin()));
  EXPECT_EQ(0xEE, out[bytes]) << "wrote past the message";
}

// Full slots of messages larger than a slot go through the timed choice of stores
// (one cached and one streamed first, then by the two ends' timings): the bytes
// must not care.
TEST_P(ShmLinkSizes, RepeatedMessagesDeliverEveryByteWhateverTheStores) {
  auto [cma, bytes] = GetParam();
  Pair p(cma);
  auto data = pattern(bytes, 11);
  std::vector<unsigned char> out(bytes + 1, 0xEE);
  for (int round = 0; round < 3; ++round) {
    std::fill(out.begin(), out.begin() + static_cast<long>(bytes), 0);
    uint64_t ticket = p.l0[0]->send(data.data(), bytes, 9 + round);
    transport::RecvOp op;
    op.dst = out.data();
    op.tag = 9 + round;
    op.bytes = bytes;
    bool done = false;
    for (int spins = 0; spins < 10000000 && !done; ++spins) {
      ASSERT_TRUE(p.l1[0]->poll_recv(op, &done).ok());
      p.l0[0]->progress();
    }
    ASSERT_TRUE(done) << "round " << round;
    while (!p.l0[0]->send_done(ticket)) p.l0[0]->progress();
    ASSERT_TRUE(std::equal(data.begin(), data.end(), out.begin())) << "round " << round;
    EXPECT_EQ(0xEE, out[bytes]) << "wrote past the message";
  }
}

TEST_P(ShmLinkSizes, ConsumerSeesEveryByteOnceInOrder) {
  auto [cma, bytes] = GetParam();
  Pair p(cma);
  auto data = pattern(bytes, 3);
  std::vector<unsigned char> acc(bytes, 1);
  Summer sum(&acc);
  transport::RecvOp op;
  op.consumer = &sum;
  ASSERT_TRUE(transfer(p.l1[0].get(), p.l0[0].get(), data.data(), bytes, op, 7).ok());
  for (size_t i = 0; i < bytes; ++i)
    ASSERT_EQ(static_cast<unsigned char>(data[i] + 1), acc[i]) << "byte " << i;
}

// 0 and inline sizes, one slot, several slots (eager), and rendezvous sizes.
INSTANTIATE_TEST_SUITE_P(Sizes, ShmLinkSizes,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values(0, 1, 8, 32, 33, 16384, 16385, 65536,
                                                              65537, 1 << 20, (3 << 20) + 5)));

TEST(ShmLink, MemAllocBuffersAreReadInPlace) {
  Pair p(true);
  const size_t bytes = 1 << 20;
  void* buf = nullptr;
  ASSERT_TRUE(mem_alloc(bytes, &buf).ok());
  auto data = pattern(bytes, 11);
  std::memcpy(buf, data.data(), bytes);
  std::vector<unsigned char> out(bytes, 0);
  transport::RecvOp op;
  op.dst = out.data();
  ASSERT_TRUE(transfer(p.l0[0].get(), p.l1[0].get(), buf, bytes, op, 1).ok());
  EXPECT_EQ(0, std::memcmp(out.data(), data.data(), bytes));
  ASSERT_TRUE(mem_free(buf).ok());
  EXPECT_FALSE(mem_free(buf).ok()) << "double free must be an error";
}

TEST(ShmLink, LargeOrdinaryBuffersAreReadInPlaceOnlyWhereCmaPays) {
  // How a 1 MiB message reaches a reducing receiver shows its path: in place,
  // in WEFT_SHM_PULL_BYTES reads (4 of 256 KiB) or one mapped piece; through
  // the FIFO, one piece per WEFT_SHM_SLOT_BYTES slot.
  const size_t bytes = 1 << 20;
  auto data = pattern(bytes, 5);
  void* shared = nullptr;
  ASSERT_TRUE(mem_alloc(bytes, &shared).ok());
  std::memcpy(shared, data.data(), bytes);
  for (bool cma : {true, false}) {
    Pair p(cma);
    std::vector<unsigned char> acc(bytes, 0);
    Summer ordinary(&acc), mapped(&acc);
    transport::RecvOp op;
    op.consumer = &ordinary;
    ASSERT_TRUE(transfer(p.l0[0].get(), p.l1[0].get(), data.data(), bytes, op, 1).ok());
    const int slots = static_cast<int>(bytes / static_cast<size_t>(params::SHM_SLOT_BYTES()));
    EXPECT_EQ(ordinary.pieces, cma ? 4 : slots) << (cma ? "cma" : "fifo");
    transport::RecvOp op2;
    op2.consumer = &mapped;
    ASSERT_TRUE(transfer(p.l0[0].get(), p.l1[0].get(), shared, bytes, op2, 2).ok());
    EXPECT_EQ(mapped.pieces, 1) << "weftMemAlloc buffers are read in place either way";
    for (size_t i = 0; i < bytes; i += 4099) ASSERT_EQ(acc[i], static_cast<unsigned char>(2 * data[i]));
  }
  ASSERT_TRUE(mem_free(shared).ok());
}

TEST(ShmLink, PiecesAConsumerKeepsAreNotOverwrittenUntilItReadThem) {
  // Through the FIFO (3 FIFOs' worth: every slot refilled), read in place with
  // cross-memory attach (the bounce buffer refilled), and mapped in place.
  const size_t bytes = 3 * static_cast<size_t>(params::SHM_SLOTS() * params::SHM_SLOT_BYTES()) + 5;
  auto data = weft::testing::noise(bytes, 21);
  void* shared = nullptr;
  ASSERT_TRUE(mem_alloc(bytes, &shared).ok());
  std::memcpy(shared, data.data(), bytes);
  for (bool cma : {false, true})
    for (const void* src : {static_cast<const void*>(data.data()), static_cast<const void*>(shared)}) {
      Pair p(cma);
      weft::testing::DeferredConsumer c(bytes);
      transport::RecvOp op;
      op.consumer = &c;
      ASSERT_TRUE(transfer(p.l0[0].get(), p.l1[0].get(), src, bytes, op, 4).ok());
      EXPECT_TRUE(c.data == data) << (cma ? "cma" : "fifo") << (src == shared ? ", weftMemAlloc" : "");
    }
  ASSERT_TRUE(mem_free(shared).ok());
}

TEST(ShmLink, ManyQueuedSendsOverflowTheFifoAndStillArriveInOrder) {
  Pair p(false);
  // Twice as many 20 KB messages as the FIFO has slots (each takes at least
  // one): more than it holds, so most wait in the queue.
  const int n = 2 * static_cast<int>(params::SHM_SLOTS());
  std::vector<std::vector<unsigned char>> msgs;
  std::vector<uint64_t> tickets;
  for (int i = 0; i < n; ++i) {
    msgs.push_back(pattern(20000, i));
    tickets.push_back(p.l0[0]->send(msgs.back().data(), 20000, 100 + i));
  }
  for (int i = 0; i < n; ++i) {
    std::vector<unsigned char> out(20000);
    transport::RecvOp op;
    op.dst = out.data();
    op.tag = 100 + i;
    op.bytes = 20000;
    bool done = false;
    for (int spins = 0; !done && spins < 1000000; ++spins) {
      ASSERT_TRUE(p.l1[0]->poll_recv(op, &done).ok());
      p.l0[0]->progress();
    }
    ASSERT_TRUE(done) << "message " << i;
    ASSERT_EQ(out, msgs[i]) << "message " << i;
  }
  for (uint64_t t : tickets) EXPECT_TRUE(p.l0[0]->send_done(t));
}

TEST(ShmLink, MismatchedSizeIsAnErrorNamingThePeer) {
  Pair p(true);
  auto data = pattern(64, 1);
  p.l0[0]->send(data.data(), 64, 5);
  std::vector<unsigned char> out(128);
  transport::RecvOp op;
  op.dst = out.data();
  op.tag = 5;
  op.bytes = 128;
  bool done = false;
  Status st = p.l1[0]->poll_recv(op, &done);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(weftInvalidUsage, st.code());
  EXPECT_NE(std::string::npos, st.message().find("from rank 0")) << st.message();
  EXPECT_NE(std::string::npos, st.message().find("128-byte")) << st.message();
}

TEST(ShmLink, LivePeerPassesTheCheck) {
  Pair p(true);
  EXPECT_TRUE(p.l0[0]->check_peer().ok());
}

TEST(ShmLink, DeadPeerIsReportedByCheck) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  std::vector<unsigned char> mem(ChannelLayout{64, 2}.bytes() * 2, 0);
  ChannelView v(mem.data(), ChannelLayout{64, 2});
  PeerChannel ch(child, v, v, LinkOptions{});
  usleep(100000);  // the child has exited (a zombie until reaped: still "exited")
  Status st = ch.check_peer(3);
  EXPECT_EQ(weftRemoteError, st.code());
  EXPECT_NE(std::string::npos, st.message().find("rank 3")) << st.message();
  waitpid(child, nullptr, 0);
}

// ---- communicators of one family sharing the channels ----------------------

// Polls `op` on `rx` (driving `tx`'s sends) until done or a bound.
bool receive(transport::Link* tx, transport::Link* rx, transport::RecvOp& op) {
  for (int spins = 0; spins < 1000000; ++spins) {
    bool done = false;
    if (!rx->poll_recv(op, &done).ok()) return false;
    tx->progress();
    if (done) return true;
  }
  return false;
}

transport::RecvOp recv_into(std::vector<unsigned char>& out, uint64_t tag) {
  transport::RecvOp op;
  op.dst = out.data();
  op.bytes = out.size();
  op.tag = tag;
  return op;
}

TEST(ShmContexts, AReceiverGetsItsMessagesPastAnotherContextsAtTheHead) {
  for (bool cma : {false, true}) {
    Pair p(cma);
    p.add_context();
    // Context 0's messages reach the FIFO first: two eager (one inline, one of
    // several slots) and one large (rendezvous with cma, else slots).
    auto a1 = pattern(8, 1), a2 = pattern(70000, 2), a3 = pattern(1 << 20, 3), b1 = pattern(40000, 4);
    p.l0[0]->send(a1.data(), a1.size(), 11);
    p.l0[0]->send(a2.data(), a2.size(), 12);
    p.l0[0]->send(a3.data(), a3.size(), 13);
    p.l0[1]->send(b1.data(), b1.size(), 21);
    // Context 1 receives first: context 0's slots are moved aside for it.
    std::vector<unsigned char> ob1(b1.size());
    auto op = recv_into(ob1, 21);
    bool got = false;
    for (int spins = 0; !got && spins < 1000000; ++spins) {
      ASSERT_TRUE(p.l1[1]->poll_recv(op, &got).ok());
      p.l0[0]->progress();
      p.l0[1]->progress();
    }
    ASSERT_TRUE(got) << (cma ? "cma" : "fifo") << ": context 1 waited behind context 0";
    EXPECT_EQ(ob1, b1);
    // Context 0 then gets its own, in order and intact.
    std::vector<unsigned char> o1(a1.size()), o2(a2.size()), o3(a3.size());
    auto op1 = recv_into(o1, 11), op2 = recv_into(o2, 12), op3 = recv_into(o3, 13);
    ASSERT_TRUE(receive(p.l0[0].get(), p.l1[0].get(), op1));
    ASSERT_TRUE(receive(p.l0[0].get(), p.l1[0].get(), op2));
    ASSERT_TRUE(receive(p.l0[0].get(), p.l1[0].get(), op3));
    EXPECT_EQ(o1, a1);
    EXPECT_EQ(o2, a2);
    EXPECT_EQ(o3, a3);
  }
}

// A receive from any source looks before it takes: peek names a context's next
// message past another context's at the head, and leaves both whole.
TEST(ShmContexts, PeekNamesAContextsNextMessageWithoutReceivingIt) {
  Pair p(false);
  p.add_context();
  transport::NextMessage next;
  ASSERT_TRUE(p.l1[1]->peek(&next).ok());
  EXPECT_FALSE(next.arrived);
  auto a = pattern(70000, 1), b = pattern(40000, 2);
  p.l0[0]->send(a.data(), a.size(), 11);
  p.l0[1]->send(b.data(), b.size(), 21);
  for (int spins = 0; !next.arrived && spins < 1000000; ++spins) {
    p.l0[0]->progress();
    p.l0[1]->progress();
    ASSERT_TRUE(p.l1[1]->peek(&next).ok());
  }
  ASSERT_TRUE(next.arrived);
  EXPECT_EQ(next.tag, 21u);
  EXPECT_EQ(next.bytes, b.size());
  ASSERT_TRUE(p.l1[0]->peek(&next).ok());  // context 0's, moved aside on the way
  EXPECT_TRUE(next.arrived);
  EXPECT_EQ(next.tag, 11u);
  EXPECT_EQ(next.bytes, a.size());
  std::vector<unsigned char> oa(a.size()), ob(b.size());
  auto opa = recv_into(oa, 11), opb = recv_into(ob, 21);
  ASSERT_TRUE(receive(p.l0[1].get(), p.l1[1].get(), opb));
  ASSERT_TRUE(receive(p.l0[0].get(), p.l1[0].get(), opa));
  EXPECT_EQ(oa, a);
  EXPECT_EQ(ob, b);
}

TEST(ShmContexts, WhatIsMovedAsideIsBoundedByAFifoPerContext) {
  Pair p(false);
  p.add_context();
  // Context 0 queues three FIFOs' worth that nobody receives yet.
  const size_t slot = static_cast<size_t>(params::SHM_SLOT_BYTES()), nslots = static_cast<size_t>(params::SHM_SLOTS());
  auto big = pattern(3 * nslots * slot, 9);
  uint64_t t = p.l0[0]->send(big.data(), big.size(), 5);
  // Context 1's many messages still flow while context 1 alone receives.
  for (int i = 0; i < 3 * static_cast<int>(nslots); ++i) {
    auto m = pattern(slot, 100 + i);
    p.l0[1]->send(m.data(), m.size(), 100 + static_cast<uint64_t>(i));
    std::vector<unsigned char> out(slot);
    auto op = recv_into(out, 100 + static_cast<uint64_t>(i));
    bool got = false;
    for (int spins = 0; !got && spins < 1000000; ++spins) {
      ASSERT_TRUE(p.l1[1]->poll_recv(op, &got).ok());
      p.l0[0]->progress();
      p.l0[1]->progress();
    }
    ASSERT_TRUE(got) << "message " << i;
    ASSERT_EQ(out, m) << "message " << i;
  }
  // Context 0's sender stopped at one FIFO's worth unconsumed: its message is
  // not all posted until its receiver takes some.
  EXPECT_FALSE(p.l0[0]->send_done(t));
  std::vector<unsigned char> out(big.size());
  auto op = recv_into(out, 5);
  ASSERT_TRUE(receive(p.l0[0].get(), p.l1[0].get(), op));
  EXPECT_EQ(out, big);
  EXPECT_TRUE(p.l0[0]->send_done(t));
}

TEST(ShmContexts, RendezvousCompletesPerContextInAnyOrder) {
  Pair p(true);
  p.add_context();
  auto a = pattern(1 << 20, 1), b = pattern(1 << 20, 2);
  uint64_t ta = p.l0[0]->send(a.data(), a.size(), 1);
  uint64_t tb = p.l0[1]->send(b.data(), b.size(), 2);
  std::vector<unsigned char> ob(b.size());
  auto opb = recv_into(ob, 2);
  ASSERT_TRUE(receive(p.l0[1].get(), p.l1[1].get(), opb));
  EXPECT_EQ(ob, b);
  EXPECT_TRUE(p.l0[1]->send_done(tb)) << "context 1's buffer was read";
  EXPECT_FALSE(p.l0[0]->send_done(ta)) << "context 0's buffer was not read yet";
  std::vector<unsigned char> oa(a.size());
  auto opa = recv_into(oa, 1);
  ASSERT_TRUE(receive(p.l0[0].get(), p.l1[0].get(), opa));
  EXPECT_EQ(oa, a);
  EXPECT_TRUE(p.l0[0]->send_done(ta));
}

TEST(ShmContexts, AClosedContextsSlotsNeverReachItsSuccessor) {
  Pair p(false);
  p.add_context();
  // Context 1 is torn down with a message on its way to it ...
  auto stale = pattern(100, 1);
  p.l0[1]->send(stale.data(), stale.size(), 7);
  p.l0.pop_back();
  p.l1.pop_back();
  // ... and the next communicator reuses its number (a new generation).
  p.add_context();
  auto fresh = pattern(100, 2);
  p.l0[1]->send(fresh.data(), fresh.size(), 7);
  std::vector<unsigned char> out(100);
  auto op = recv_into(out, 7);
  ASSERT_TRUE(receive(p.l0[1].get(), p.l1[1].get(), op));
  EXPECT_EQ(out, fresh);
}

// A destroyed communicator's receive buffers go with its context: the bounce
// buffer of a reducing receive read with cross-memory attach (WEFT_SHM_PULL_BYTES)
// is freed at close, not kept for whichever communicator gets the number next.
// Kept, splits made and destroyed left one per context number and peer behind
// (the soak's malloc'd bytes grew 256 KiB at a time).
TEST(ShmContexts, AClosedContextHoldsNoBuffers) {
  Pair p(true);
  PeerChannel* rx = p.t1->channel(0);
  const size_t bytes = 1 << 20;
  auto data = pattern(bytes, 6);
  for (int round = 0; round < 3; ++round) {
    p.add_context();
    std::vector<unsigned char> acc(bytes, 0);
    Summer sum(&acc);
    transport::RecvOp op;
    op.consumer = &sum;
    ASSERT_TRUE(transfer(p.l0[1].get(), p.l1[1].get(), data.data(), bytes, op, 1).ok());
    ASSERT_EQ(static_cast<size_t>(sum.pieces), bytes / rx->options().pull_bytes) << "read through the bounce buffer";
    EXPECT_GE(rx->held_bytes(), rx->options().pull_bytes) << "round " << round;
    p.l0.pop_back();
    p.l1.pop_back();
    EXPECT_EQ(rx->held_bytes(), 0u) << "round " << round << ": the closed context kept its buffers";
  }
}

TEST(ShmContexts, EveryContextCanBeOpenedAndNoMore) {
  Pair p(false);
  PeerChannel* ch = p.t0->channel(1);
  std::vector<uint32_t> opened;
  for (size_t i = 1; i < kMaxContexts; ++i) {  // context 0 is the pair's own
    uint32_t c = ch->open_in();
    ASSERT_NE(c, kNoContext) << i;
    opened.push_back(c);
  }
  EXPECT_EQ(ch->open_in(), kNoContext);
  ch->close_in(opened[5]);
  uint32_t again = ch->open_in();
  EXPECT_EQ(again & 0xffffu, opened[5] & 0xffffu) << "a closed context's number is reused";
  EXPECT_NE(again >> 16, opened[5] >> 16) << "... with a new generation";
}

}  // namespace
}  // namespace weft::shm
