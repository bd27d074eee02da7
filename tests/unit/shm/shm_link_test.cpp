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

#include "base/params.h"
#include "transports/shm/memalloc.h"
#include "transports/shm/shm_link.h"
#include "transports/shm/shm_transport.h"

namespace weft::shm {
namespace {

struct Pair {
  std::unique_ptr<ShmTransport> t0, t1;
  std::vector<std::unique_ptr<transport::Link>> l0, l1;  // l0[0]: 0 -> 1, l1[0]: 1 -> 0

  // cma: ordinary buffers above the eager limit are read with cross-memory
  // attach; else they cross the FIFO (weftMemAlloc buffers are mapped either way).
  explicit Pair(bool cma) {
    std::string prefix = "/weft-unittest-" + std::to_string(getpid()) + (cma ? "-c" : "-n");
    std::vector<LocalPeer> local = {{0, getpid(), cma_probe_address()},
                                    {1, getpid(), cma_probe_address()}};
    EXPECT_TRUE(ShmTransport::create(prefix, 0, local, &t0).ok());
    EXPECT_TRUE(ShmTransport::create(prefix, 1, local, &t1).ok());
    EXPECT_TRUE(t0->connect(&l0, cma).ok());
    EXPECT_TRUE(t1->connect(&l1, cma).ok());
    t0->unlink();
    t1->unlink();
  }
};

class Summer final : public transport::Consumer {
 public:
  explicit Summer(std::vector<unsigned char>* out) : out_(out) {}
  void consume(const void* piece, size_t offset, size_t bytes) override {
    const auto* p = static_cast<const unsigned char*>(piece);
    for (size_t i = 0; i < bytes; ++i) (*out_)[offset + i] += p[i];
    ++pieces;
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

class ShmLinkSizes : public ::testing::TestWithParam<std::tuple<bool, size_t>> {};

TEST_P(ShmLinkSizes, PlainReceiveDeliversEveryByte) {
  auto [cma, bytes] = GetParam();
  Pair p(cma);
  auto data = pattern(bytes, 7);
  std::vector<unsigned char> out(bytes + 1, 0xEE);
  transport::RecvOp op;
  op.dst = out.data();
  ASSERT_TRUE(transfer(p.l0[0].get(), p.l1[0].get(), data.data(), bytes, op, 42).ok());
  EXPECT_EQ(0, std::memcmp(out.data(), data.data(), bytes));
  EXPECT_EQ(0xEE, out[bytes]) << "wrote past the message";
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
  ShmLink link(3, child, v, v, LinkOptions{});
  usleep(100000);  // the child has exited (a zombie until reaped: still "exited")
  Status st = link.check_peer();
  EXPECT_EQ(weftRemoteError, st.code());
  EXPECT_NE(std::string::npos, st.message().find("rank 3")) << st.message();
  waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace weft::shm
