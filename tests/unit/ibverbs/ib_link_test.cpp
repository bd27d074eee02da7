// The verbs link's protocol over an in-memory queue pair (fake_queue_pair.h):
// messages of every size relative to a slot arrive intact in both directions,
// reductions see pieces in order, credits hold the sender to the receiver's
// ring, a send is done only once the NIC has read it, send buffers are
// registered once, and mismatched calls and failed completions give errors
// naming the peer and the verbs status.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstring>
#include <numeric>
#include <vector>

#include "tests/unit/deferred_consumer.h"
#include "tests/unit/ibverbs/fake_queue_pair.h"
#include "tests/unit/ibverbs/link_test_util.h"
#include "transports/ibverbs/ib_link.h"

namespace weft::ib {
namespace {

using testing::FakeFabric;
using testing::FakeQueuePair;
using testing::pattern;
using testing::receive;

struct Pair {
  FakeFabric fabric;
  std::unique_ptr<IbLink> a, b;  // a is rank 0, b rank 1

  explicit Pair(LinkOptions opts = small()) {
    auto qa = fabric.make(0), qb = fabric.make(1);
    fabric.bind(static_cast<FakeQueuePair*>(qa.get()), static_cast<FakeQueuePair*>(qb.get()));
    const uint32_t depth = context_budget(opts);
    EXPECT_TRUE(IbLink::create(std::make_shared<Connection>(std::move(qa), "host-b", depth), 1, opts, &a).ok());
    EXPECT_TRUE(IbLink::create(std::make_shared<Connection>(std::move(qb), "host-a", depth), 0, opts, &b).ok());
    EXPECT_TRUE(a->set_remote(b->local_ring()).ok());
    EXPECT_TRUE(b->set_remote(a->local_ring()).ok());
  }
  static LinkOptions small() { return testing::small_ring(); }
};

TEST(IbLink, MessagesOfEverySizeArriveInBothDirections) {
  Pair p;
  const size_t payload = 256 - sizeof(SlotHeader);
  for (size_t n : {size_t{0}, size_t{1}, payload - 1, payload, payload + 1, 3 * payload,
                   10 * payload + 7, size_t{100000}}) {
    auto ab = pattern(n, 1), ba = pattern(n, 2);
    uint64_t t1 = p.a->send(ab.data(), n, 7);
    uint64_t t2 = p.b->send(ba.data(), n, 9);
    std::vector<unsigned char> got_b(n + 1, 0xee), got_a(n + 1, 0xee);
    transport::RecvOp rb{7, n, got_b.data()}, ra{9, n, got_a.data()};
    ASSERT_TRUE(receive(*p.b, *p.a, rb).ok()) << n;
    ASSERT_TRUE(receive(*p.a, *p.b, ra).ok()) << n;
    EXPECT_TRUE(std::equal(ab.begin(), ab.end(), got_b.begin())) << n;
    EXPECT_TRUE(std::equal(ba.begin(), ba.end(), got_a.begin())) << n;
    EXPECT_EQ(got_b[n], 0xee) << "wrote past the message, n = " << n;
    EXPECT_TRUE(p.a->send_done(t1));
    EXPECT_TRUE(p.b->send_done(t2));
  }
}

struct Collect final : transport::Consumer {
  std::vector<unsigned char> bytes;
  std::vector<size_t> pieces;
  bool consume(const void* piece, size_t offset, size_t n) override {
    EXPECT_EQ(offset, bytes.size()) << "pieces out of order";
    const auto* c = static_cast<const unsigned char*>(piece);
    bytes.insert(bytes.end(), c, c + n);
    pieces.push_back(n);
    return true;
  }
};

TEST(IbLink, ConsumerGetsPiecesInOrderAndWholeElements) {
  Pair p;
  auto msg = pattern(5000, 3);
  p.a->send(msg.data(), msg.size(), 1);
  Collect c;
  transport::RecvOp op{1, msg.size(), nullptr, &c};
  ASSERT_TRUE(receive(*p.b, *p.a, op).ok());
  EXPECT_EQ(c.bytes, msg);
  for (size_t i = 0; i + 1 < c.pieces.size(); ++i) EXPECT_EQ(c.pieces[i] % 64, 0u);
}

TEST(IbLink, ASlotAConsumerKeepsIsNotRefilledUntilItIsRead) {
  // 20 KB through a 4-slot ring: every slot is refilled many times, so a slot
  // handed back before the consumer read it would be overwritten.
  Pair p;
  auto msg = weft::testing::noise(20000, 9);
  p.a->send(msg.data(), msg.size(), 2);
  weft::testing::DeferredConsumer c(msg.size());
  transport::RecvOp op{2, msg.size(), nullptr, &c};
  ASSERT_TRUE(receive(*p.b, *p.a, op).ok());
  EXPECT_GT(c.pieces, 4);
  EXPECT_EQ(c.data, msg);
}

TEST(IbLink, CreditsHoldTheSenderToTheReceiversRing) {
  Pair p;
  p.fabric.auto_deliver = false;
  std::vector<std::vector<unsigned char>> msgs;
  for (int i = 0; i < 20; ++i) msgs.push_back(pattern(50, static_cast<unsigned>(i)));
  for (auto& m : msgs) p.a->send(m.data(), m.size(), 5);
  // Only as many writes as the ring has slots go out before credits return.
  EXPECT_EQ(p.fabric.queued(), 4u);
  p.fabric.deliver();
  p.a->progress();
  EXPECT_EQ(p.fabric.queued(), 0u) << "posted beyond the peer's free slots";
  p.fabric.auto_deliver = true;
  for (auto& m : msgs) {
    std::vector<unsigned char> got(m.size());
    transport::RecvOp op{5, m.size(), got.data()};
    bool done = false;
    for (int spins = 0; spins < 1000 && !done; ++spins) {
      p.fabric.deliver();
      ASSERT_TRUE(p.b->poll_recv(op, &done).ok());
      p.a->progress();
    }
    ASSERT_TRUE(done);
    EXPECT_EQ(got, m);
  }
}

TEST(IbLink, LargeMessagesBothWaysThroughASmallRing) {
  Pair p;
  auto ab = pattern(1 << 20, 4), ba = pattern(1 << 20, 5);
  p.a->send(ab.data(), ab.size(), 3);
  p.b->send(ba.data(), ba.size(), 3);
  std::vector<unsigned char> got_a(ba.size()), got_b(ab.size());
  transport::RecvOp ra{3, ba.size(), got_a.data()}, rb{3, ab.size(), got_b.data()};
  bool da = false, db = false;
  for (int spins = 0; spins < 1000000 && !(da && db); ++spins) {
    if (!da) {
      ASSERT_TRUE(p.a->poll_recv(ra, &da).ok());
    }
    if (!db) {
      ASSERT_TRUE(p.b->poll_recv(rb, &db).ok());
    }
    p.a->progress();  // as the executor does while it waits
    p.b->progress();
  }
  ASSERT_TRUE(da && db);
  EXPECT_EQ(got_a, ba);
  EXPECT_EQ(got_b, ab);
}

TEST(IbLink, SendIsDoneOnlyAfterTheNicReadTheBuffer) {
  Pair p;
  p.fabric.auto_deliver = false;
  auto msg = pattern(100, 6);
  uint64_t t = p.a->send(msg.data(), msg.size(), 1);
  EXPECT_FALSE(p.a->send_done(t));
  p.fabric.deliver();
  EXPECT_TRUE(p.a->send_done(t));
}

TEST(IbLink, SendBuffersAreRegisteredOnce) {
  Pair p;
  int before = p.fabric.registrations;
  auto msg = pattern(4096, 7);
  for (int i = 0; i < 10; ++i) {
    p.a->send(msg.data(), msg.size(), 2);
    std::vector<unsigned char> got(msg.size());
    transport::RecvOp op{2, msg.size(), got.data()};
    ASSERT_TRUE(receive(*p.b, *p.a, op).ok());
  }
  EXPECT_EQ(p.fabric.registrations - before, 1);
  EXPECT_EQ(p.a->reg_cache().misses(), 1u);
  EXPECT_EQ(p.a->reg_cache().hits(), 9u);
}

// A receive from any source looks before it takes: peek names the next
// message once its first slot is in the ring and leaves it whole.
TEST(IbLink, PeekNamesTheNextMessageWithoutReceivingIt) {
  Pair p;
  transport::NextMessage next;
  ASSERT_TRUE(p.b->peek(&next).ok());
  EXPECT_FALSE(next.arrived);
  auto m1 = pattern(500, 3), m2 = pattern(5, 4);  // m1 spans three slots
  p.a->send(m1.data(), m1.size(), 21);
  p.a->send(m2.data(), m2.size(), 22);
  for (const auto* m : {&m1, &m2}) {
    next = {};
    for (int spins = 0; !next.arrived && spins < 100000; ++spins) {
      p.a->progress();
      ASSERT_TRUE(p.b->peek(&next).ok());
    }
    ASSERT_TRUE(next.arrived);
    EXPECT_EQ(next.tag, m == &m1 ? 21u : 22u);
    EXPECT_EQ(next.bytes, m->size());
    std::vector<unsigned char> got(m->size());
    transport::RecvOp op{next.tag, got.size(), got.data()};
    ASSERT_TRUE(receive(*p.b, *p.a, op).ok());
    EXPECT_EQ(got, *m);
  }
}

TEST(IbLink, MismatchedCallsAreNamedNotMixed) {
  Pair p;
  auto msg = pattern(64, 8);
  p.a->send(msg.data(), msg.size(), 11);
  std::vector<unsigned char> got(32);
  transport::RecvOp op{11, 32, got.data()};
  Status st = receive(*p.b, *p.a, op);
  EXPECT_EQ(st.code(), weftInvalidUsage);
  EXPECT_NE(st.message().find("mismatched calls"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("from rank 0"), std::string::npos) << st.message();

  Pair q;
  q.a->send(msg.data(), msg.size(), 11);
  std::vector<unsigned char> got2(64);
  transport::RecvOp op2{12, 64, got2.data()};
  st = receive(*q.b, *q.a, op2);
  EXPECT_EQ(st.code(), weftInvalidUsage);
  EXPECT_NE(st.message().find("tag 0xb"), std::string::npos) << st.message();
}

TEST(IbLink, FailedCompletionNamesThePeerAndTheVerbsStatus) {
  Pair p;
  p.fabric.fail_next_write(0, 12, "transport retry counter exceeded");
  auto msg = pattern(1000, 9);
  uint64_t t = p.a->send(msg.data(), msg.size(), 1);
  EXPECT_FALSE(p.a->send_done(t));
  Status st = p.a->check_peer();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), weftRemoteError);
  EXPECT_NE(st.message().find("peer rank 1 (host-b)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("transport retry counter exceeded (status 12)"), std::string::npos)
      << st.message();
  // Sticky: later calls report the first failure, not the flushes after it.
  std::vector<unsigned char> got(10);
  transport::RecvOp op{1, 10, got.data()};
  bool done = false;
  Status again = p.a->poll_recv(op, &done);
  EXPECT_EQ(again.message(), st.message());
}

TEST(IbLink, ReceivesNeverRunDryUnderCreditTraffic) {
  // Many tiny messages each way, received one at a time: every credit write
  // and data write must find a posted receive (the fake fails with RNR if not).
  Pair p;
  auto msg = pattern(8, 10);
  for (int i = 0; i < 500; ++i) {
    p.a->send(msg.data(), msg.size(), static_cast<uint64_t>(i));
    p.b->send(msg.data(), msg.size(), static_cast<uint64_t>(i));
    std::vector<unsigned char> x(8), y(8);
    transport::RecvOp ra{static_cast<uint64_t>(i), 8, x.data()}, rb{static_cast<uint64_t>(i), 8, y.data()};
    ASSERT_TRUE(receive(*p.b, *p.a, rb).ok()) << i;
    ASSERT_TRUE(receive(*p.a, *p.b, ra).ok()) << i;
    ASSERT_TRUE(p.a->check_peer().ok()) << p.a->check_peer().message();
    ASSERT_TRUE(p.b->check_peer().ok()) << p.b->check_peer().message();
  }
}

TEST(IbLink, RefusesABadRingOrOptions) {
  FakeFabric f;
  LinkOptions o;
  o.slot_bytes = 100;
  std::unique_ptr<IbLink> l;
  auto conn = std::make_shared<Connection>(f.make(0), "x", 1000);
  Status st = IbLink::create(conn, 1, o, &l);
  EXPECT_EQ(st.code(), weftInvalidArgument);
  EXPECT_NE(st.message().find("WEFT_IB_SLOT_BYTES=100"), std::string::npos) << st.message();
  ASSERT_TRUE(IbLink::create(conn, 1, LinkOptions{}, &l).ok());
  st = l->set_remote(RemoteRing{0x1000, 1, 0, 4096});
  EXPECT_EQ(st.code(), weftRemoteError);
  EXPECT_NE(st.message().find("peer rank 1 (x)"), std::string::npos) << st.message();
  // The receives each side posts count the peer's slots as its own.
  st = l->set_remote(RemoteRing{0x1000, 1, 8, 4096});
  EXPECT_EQ(st.code(), weftInvalidUsage);
  EXPECT_NE(st.message().find("WEFT_IB_SLOTS must be the same"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace weft::ib
