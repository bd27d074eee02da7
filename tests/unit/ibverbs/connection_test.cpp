// Communicators sharing one queue pair (connection.h), over the in-memory
// queue pair: each context gets exactly its own messages whatever the other
// does, a closed context's index and memory are kept until the peer's close
// notice, late credits to it are dropped, the queue pair's depth is shared
// out and refused beyond it, a failed completion fails every context naming
// each one's peer, and the set-up path (open_contexts + exchange) connects
// two ranks run as threads.
#include <gtest/gtest.h>

#include <barrier>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/unit/ibverbs/fake_queue_pair.h"
#include "tests/unit/ibverbs/link_test_util.h"
#include "transports/ibverbs/ib_transport.h"

namespace weft::ib {
namespace {

using testing::FakeFabric;
using testing::FakeQueuePair;
using testing::pattern;
using testing::receive;
const auto small = testing::small_ring;

// Two ranks' ends of one queue pair; contexts are opened on both as a pair.
struct Shared {
  FakeFabric fabric;
  FakeQueuePair* qa = nullptr;
  FakeQueuePair* qb = nullptr;
  std::shared_ptr<Connection> a, b;  // rank 0's end, rank 1's

  explicit Shared(uint32_t depth = 10 * context_budget(small())) {
    auto pa = fabric.make(0), pb = fabric.make(1);
    qa = static_cast<FakeQueuePair*>(pa.get());
    qb = static_cast<FakeQueuePair*>(pb.get());
    fabric.bind(qa, qb);
    a = std::make_shared<Connection>(std::move(pa), "host-b", depth);
    b = std::make_shared<Connection>(std::move(pb), "host-a", depth);
  }
  // A communicator's links: la on rank 0 to `peer_of_a`, lb on rank 1 to `peer_of_b`.
  void open(std::unique_ptr<IbLink>* la, std::unique_ptr<IbLink>* lb, int peer_of_a = 1, int peer_of_b = 0) {
    ASSERT_TRUE(IbLink::create(a, peer_of_a, small(), la).ok());
    ASSERT_TRUE(IbLink::create(b, peer_of_b, small(), lb).ok());
    ASSERT_TRUE((*la)->set_remote((*lb)->local_ring()).ok());
    ASSERT_TRUE((*lb)->set_remote((*la)->local_ring()).ok());
  }
};

TEST(SharedQueuePair, EachContextGetsExactlyItsOwnMessages) {
  Shared s;
  std::unique_ptr<IbLink> a1, b1, a2, b2;
  s.open(&a1, &b1);
  s.open(&a2, &b2);
  EXPECT_NE(a1->local_ring().context, a2->local_ring().context);
  // Both communicators send more than a ring holds at once with the same tag;
  // communicator 2 is received whole before communicator 1 reads anything.
  auto m1 = pattern(5000, 1), m2 = pattern(5000, 2);
  a1->send(m1.data(), m1.size(), 7);
  a2->send(m2.data(), m2.size(), 7);
  std::vector<unsigned char> got1(m1.size()), got2(m2.size());
  transport::RecvOp r2{7, got2.size(), got2.data()}, r1{7, got1.size(), got1.data()};
  ASSERT_TRUE(receive(*b2, *a2, r2).ok());
  EXPECT_FALSE(r1.started);
  ASSERT_TRUE(receive(*b1, *a1, r1).ok());
  EXPECT_EQ(got1, m1);
  EXPECT_EQ(got2, m2);
  // And the other way, interleaved.
  for (int i = 0; i < 20; ++i) {
    auto x = pattern(300, 10 + static_cast<unsigned>(i)), y = pattern(17, 40 + static_cast<unsigned>(i));
    b1->send(x.data(), x.size(), 1);
    b2->send(y.data(), y.size(), 1);
    std::vector<unsigned char> gx(x.size()), gy(y.size());
    transport::RecvOp rx{1, gx.size(), gx.data()}, ry{1, gy.size(), gy.data()};
    ASSERT_TRUE(receive(*a2, *b2, ry).ok()) << i;
    ASSERT_TRUE(receive(*a1, *b1, rx).ok()) << i;
    EXPECT_EQ(gx, x) << i;
    EXPECT_EQ(gy, y) << i;
  }
  EXPECT_EQ(s.a->open_contexts(), 2u);
}

TEST(SharedQueuePair, AClosedContextIsKeptUntilThePeersCloseNotice) {
  Shared s;
  std::unique_ptr<IbLink> a1, b1, a2, b2;
  s.open(&a1, &b1);
  const uint32_t index = a1->local_ring().context;
  const size_t regs = s.fabric.live_registrations();
  a1.reset();
  EXPECT_EQ(s.a->closed_contexts(), 1u);
  EXPECT_EQ(s.fabric.live_registrations(), regs) << "rank 0 freed memory rank 1 may still write to";
  // A context opened now must not take the index rank 1 still writes to.
  s.open(&a2, &b2);
  EXPECT_NE(a2->local_ring().context, index);
  // Rank 1 closes too: its notice releases rank 0's context (seen at rank 0's next poll).
  b1.reset();
  ASSERT_TRUE(a2->check_peer().ok());
  EXPECT_EQ(s.a->closed_contexts(), 0u);
  EXPECT_EQ(s.b->closed_contexts(), 0u);
  std::unique_ptr<IbLink> a3, b3;
  s.open(&a3, &b3);
  EXPECT_EQ(a3->local_ring().context, index) << "a released index is reused";
  auto m = pattern(1000, 3);
  a3->send(m.data(), m.size(), 2);
  std::vector<unsigned char> got(m.size());
  transport::RecvOp op{2, got.size(), got.data()};
  ASSERT_TRUE(receive(*b3, *a3, op).ok());
  EXPECT_EQ(got, m);
}

TEST(SharedQueuePair, LateCreditsToAClosedContextAreDropped) {
  Shared s;
  std::unique_ptr<IbLink> a1, b1, a2, b2;
  s.open(&a1, &b1);
  s.open(&a2, &b2);
  s.fabric.auto_deliver = false;
  auto m = pattern(300, 4);  // two slots: rank 1 returns them at once (credit_batch 2)
  a1->send(m.data(), m.size(), 3);
  s.fabric.deliver();
  std::vector<unsigned char> got(m.size());
  transport::RecvOp op{3, got.size(), got.data()};
  bool done = false;
  ASSERT_TRUE(b1->poll_recv(op, &done).ok());
  ASSERT_TRUE(done);
  EXPECT_EQ(got, m);
  // Rank 1's credit write is on the wire while rank 0 closes.
  EXPECT_EQ(s.fabric.queued(), 1u);
  a1.reset();
  EXPECT_EQ(s.fabric.queued(), 2u) << "no close notice";
  s.fabric.deliver();
  EXPECT_EQ(s.a->closed_contexts(), 1u);
  b1.reset();
  s.fabric.deliver();
  s.fabric.auto_deliver = true;
  // Rank 0's other communicator sees no error and works; both ends release.
  ASSERT_TRUE(a2->check_peer().ok()) << a2->check_peer().message();
  ASSERT_TRUE(b2->check_peer().ok()) << b2->check_peer().message();
  auto n = pattern(700, 5);
  a2->send(n.data(), n.size(), 4);
  std::vector<unsigned char> got2(n.size());
  transport::RecvOp op2{4, got2.size(), got2.data()};
  ASSERT_TRUE(receive(*b2, *a2, op2).ok());
  EXPECT_EQ(got2, n);
  EXPECT_EQ(s.a->closed_contexts(), 0u);
  EXPECT_EQ(s.b->closed_contexts(), 0u);
}

TEST(SharedQueuePair, TheDepthIsSharedOutAndRefusedBeyond) {
  Shared s(2 * context_budget(small()));
  std::unique_ptr<IbLink> a1, b1, a2, b2, a3;
  s.open(&a1, &b1);
  s.open(&a2, &b2);
  // Every write the peer may have in flight to an open context has a receive.
  EXPECT_EQ(s.qa->posted_recvs(), 2u * context_budget(small()));
  Status st = IbLink::create(s.a, 1, small(), &a3);
  EXPECT_EQ(st.code(), weftSystemError);
  EXPECT_NE(st.message().find("room for no more communicators"), std::string::npos) << st.message();
  // Closed on both ends, a context's share comes back, and no receive is posted twice.
  a1.reset();
  b1.reset();
  ASSERT_TRUE(a2->check_peer().ok());
  ASSERT_TRUE(IbLink::create(s.a, 1, small(), &a3).ok());
  EXPECT_EQ(s.qa->posted_recvs(), 2u * context_budget(small()));
}

TEST(SharedQueuePair, ManyCommunicatorsComeAndGoWithoutLeaking) {
  Shared s(3 * context_budget(small()));
  const size_t regs = s.fabric.live_registrations();
  std::unique_ptr<IbLink> keep_a, keep_b;
  s.open(&keep_a, &keep_b);
  for (int i = 0; i < 300; ++i) {
    std::unique_ptr<IbLink> a, b;
    s.open(&a, &b);
    auto m = pattern(400, static_cast<unsigned>(i));
    a->send(m.data(), m.size(), 9);
    keep_b->send(m.data(), m.size(), 9);
    std::vector<unsigned char> got(m.size()), got2(m.size());
    transport::RecvOp op{9, got.size(), got.data()}, op2{9, got2.size(), got2.data()};
    ASSERT_TRUE(receive(*b, *a, op).ok()) << i;
    ASSERT_TRUE(receive(*keep_a, *keep_b, op2).ok()) << i;
    ASSERT_EQ(got, m) << i;
    ASSERT_EQ(got2, m) << i;
    if (i % 2 == 0) {
      a.reset();
      b.reset();
    } else {
      b.reset();
      a.reset();
    }
  }
  ASSERT_TRUE(keep_a->check_peer().ok());
  ASSERT_TRUE(keep_b->check_peer().ok());
  EXPECT_EQ(s.a->closed_contexts() + s.b->closed_contexts(), 0u);
  EXPECT_LE(s.qa->posted_recvs(), 3u * context_budget(small()));
  keep_a.reset();
  keep_b.reset();
  s.a.reset();
  s.b.reset();
  EXPECT_EQ(s.fabric.live_registrations(), regs) << "memory left registered";
}

TEST(SharedQueuePair, AFailedCompletionFailsEveryContextNamingItsPeer) {
  Shared s;
  std::unique_ptr<IbLink> a1, b1, a2, b2;
  s.open(&a1, &b1, 1, 0);
  s.open(&a2, &b2, 5, 3);  // in the second communicator the ranks are 3 and 5
  s.fabric.fail_next_write(0, 12, "transport retry counter exceeded");
  auto m = pattern(100, 6);
  a1->send(m.data(), m.size(), 1);
  for (auto* l : {a1.get(), a2.get()}) {
    Status st = l->check_peer();
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), weftRemoteError);
    const std::string want = "peer rank " + std::to_string(l->peer()) + " (host-b)";
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("transport retry counter exceeded (status 12)"), std::string::npos)
        << st.message();
  }
  std::unique_ptr<IbLink> a3;
  EXPECT_FALSE(IbLink::create(s.a, 1, small(), &a3).ok()) << "a context opened on a failed queue pair";
}

TEST(SharedQueuePair, APeerClosingUnderAPendingReceiveIsReported) {
  Shared s;
  std::unique_ptr<IbLink> a1, b1;
  s.open(&a1, &b1);
  auto m = pattern(50, 7);
  b1->send(m.data(), m.size(), 1);
  ASSERT_TRUE(b1->send_done(0));
  b1.reset();
  // The message sent before the close still arrives; the next receive cannot.
  std::vector<unsigned char> got(m.size());
  transport::RecvOp op{1, got.size(), got.data()};
  bool done = false;
  ASSERT_TRUE(a1->poll_recv(op, &done).ok());
  ASSERT_TRUE(done);
  EXPECT_EQ(got, m);
  transport::RecvOp next{2, 10, got.data()};
  Status st = a1->poll_recv(next, &done);
  EXPECT_EQ(st.code(), weftRemoteError);
  EXPECT_NE(st.message().find("peer rank 1 (host-b) closed this communicator"), std::string::npos)
      << st.message();
}

// The set-up a split communicator runs: two ranks as threads, each opening a
// context on its end and exchanging rings through an all-gather.
TEST(SharedQueuePair, OpenContextsAndExchangeConnectTwoRanks) {
  Shared s;
  s.a->address.qpn = 11, s.a->peer_qpn = 22, s.a->address.mtu = 5;
  s.b->address.qpn = 22, s.b->peer_qpn = 11, s.b->address.mtu = 5;
  std::unique_ptr<IbLink> first_b;  // an earlier communicator keeps index 0 busy on rank 1
  ASSERT_TRUE(IbLink::create(s.b, 0, small(), &first_b).ok());
  std::barrier sync(2);
  std::vector<uint8_t> rows[2];
  auto allgather = [&](int rank) {
    return [&, rank](const void* mine, size_t bytes, void* all) {
      rows[rank].assign(static_cast<const uint8_t*>(mine), static_cast<const uint8_t*>(mine) + bytes);
      sync.arrive_and_wait();
      std::memcpy(all, rows[0].data(), bytes);
      std::memcpy(static_cast<uint8_t*>(all) + bytes, rows[1].data(), bytes);
      sync.arrive_and_wait();
      return Status::Ok();
    };
  };
  std::unique_ptr<transport::Link> links[2];
  Status result[2];
  auto rank_main = [&](int rank) {
    const std::shared_ptr<Connection>& conn = rank == 0 ? s.a : s.b;
    std::vector<std::unique_ptr<IbLink>> opened;
    std::vector<IbPeer> peers{{1 - rank, rank == 0 ? "host-b" : "host-a"}};
    result[rank] = open_contexts({conn}, peers, small(), &opened);
    if (!result[rank].ok()) return;
    result[rank] = exchange(rank, 2, peers, {opened[0].get()}, allgather(rank), [&](size_t, const ConnInfo& r) {
      return r.qpn == conn->peer_qpn ? Status::Ok() : Error(weftRemoteError, "qpn %u", r.qpn);
    });
    links[rank] = std::move(opened[0]);
  };
  std::thread t0(rank_main, 0), t1(rank_main, 1);
  t0.join();
  t1.join();
  ASSERT_TRUE(result[0].ok()) << result[0].message();
  ASSERT_TRUE(result[1].ok()) << result[1].message();
  auto* la = static_cast<IbLink*>(links[0].get());
  auto* lb = static_cast<IbLink*>(links[1].get());
  EXPECT_NE(la->local_ring().context, lb->local_ring().context) << "the indices should differ here";
  auto m = pattern(3000, 8);
  la->send(m.data(), m.size(), 5);
  lb->send(m.data(), m.size(), 6);
  std::vector<unsigned char> got_b(m.size()), got_a(m.size());
  transport::RecvOp rb{5, got_b.size(), got_b.data()}, ra{6, got_a.size(), got_a.data()};
  ASSERT_TRUE(receive(*lb, *la, rb).ok());
  ASSERT_TRUE(receive(*la, *lb, ra).ok());
  EXPECT_EQ(got_b, m);
  EXPECT_EQ(got_a, m);
}

}  // namespace
}  // namespace weft::ib
