// The executor's receive and staging rules on fake links (fake_link.h), with
// ranks as threads and hand-written plans: what src/exec promises beyond "the
// multi-process suites pass". Every expected value is written out by hand from
// the inputs; gates on the fake links fix the order of events across ranks, so
// each test exercises the case it names on every run.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace weft::testing {
namespace {

using Clock = std::chrono::steady_clock;
using Ints = std::vector<int32_t>;

// i -> k * (i + 1), i < n.
Ints times(int32_t k, size_t n) {
  Ints v(n);
  for (size_t i = 0; i < n; ++i) v[i] = k * static_cast<int32_t>(i + 1);
  return v;
}

// An in-place exchange between ranks 0 and 1, as one step of recursive doubling:
// each sends its whole buffer to the other, then receives the other's into the same
// buffer (RecvReduce: sum; Recv: swap). Over rendezvous links each rank's receive
// lands in the range its own send is still being read from.
sched::RankPlan exchange(int peer, sched::Kind kind, uint64_t count) {
  sched::RankPlan p;
  p.steps.push_back(send_step(peer, recv_buf(0, count)));
  if (kind == sched::Kind::RecvReduce) p.steps.push_back(recv_reduce_step(peer, recv_buf(0, count), recv_buf(0, count)));
  else p.steps.push_back(recv_step(peer, recv_buf(0, count)));
  return p;
}

std::vector<Status> run_in_place(FakeNet& net, const sched::RankPlan* plans, std::vector<Ints>& buf,
                                 int64_t timeout_ms = 5000) {
  return run_ranks(net.nranks(), [&](int r) {
    exec::Executor ex(r, net.links_of(r), nullptr);
    exec::Call call = int_sum_call(plans[r], buf[static_cast<size_t>(r)].data(), buf[static_cast<size_t>(r)].data(),
                                   1, timeout_ms);
    return ex.run(call);
  });
}

class InPlaceExchange : public ::testing::TestWithParam<sched::Kind> {};

// (a) Rank 0 receives only after rank 1 has read rank 0's buffer (its send is
// done: pieces may land directly); rank 1 receives everything while rank 0 has
// not yet read rank 1's buffer (its pieces must wait in staging, or rank 0 would
// read rank 1's result instead of its input). 7 int32 in pieces of 12, 12, 4 B.
TEST_P(InPlaceExchange, PeerHasAlreadyReadOurBuffer) {
  const sched::Kind kind = GetParam();
  constexpr uint64_t kCount = 7;
  FakeNet net(2, {true, 12});
  net.set_gate(1, 0, [&net] { return net.consumed(0, 1) >= 1; });
  std::vector<uint64_t> seen_by_1;  // at each piece rank 1 got: had rank 0 read rank 1's buffer?
  net.set_hook(0, 1, [&](uint64_t, size_t, size_t) { seen_by_1.push_back(net.consumed(1, 0)); });
  std::vector<Ints> buf = {times(1, kCount), times(100, kCount)};
  const sched::RankPlan plans[2] = {exchange(1, kind, kCount), exchange(0, kind, kCount)};

  std::vector<Status> st = run_in_place(net, plans, buf);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << r << ": " << st[static_cast<size_t>(r)].message();
  // Sum: 1(i+1) + 100(i+1) on both; swap: each holds the other's input.
  const bool sum = kind == sched::Kind::RecvReduce;
  EXPECT_EQ(buf[0], sum ? times(101, kCount) : times(100, kCount));
  EXPECT_EQ(buf[1], sum ? times(101, kCount) : times(1, kCount));
  EXPECT_EQ(seen_by_1, (std::vector<uint64_t>{0, 0, 0}));  // the case meant: rank 1 staged all
}

// (a) Neither has read the other's buffer when the receives start: rank 0's first
// piece arrives before rank 1 has read anything (staged), rank 1 reads rank 0's
// buffer only after that, and rank 0's later pieces arrive once its send is done
// (direct), so one receive mixes staged and direct pieces.
TEST_P(InPlaceExchange, NeitherHasReadTheOthersBufferYet) {
  const sched::Kind kind = GetParam();
  constexpr uint64_t kCount = 7;
  FakeNet net(2, {true, 12});
  net.set_gate(1, 0, [&net] { return net.consumed_bytes(1, 0) == 0 || net.consumed(0, 1) >= 1; });
  net.set_gate(0, 1, [&net] { return net.consumed_bytes(1, 0) > 0; });
  std::vector<uint64_t> seen_by_0, seen_by_1;
  net.set_hook(1, 0, [&](uint64_t, size_t, size_t) { seen_by_0.push_back(net.consumed(0, 1)); });
  net.set_hook(0, 1, [&](uint64_t, size_t, size_t) { seen_by_1.push_back(net.consumed(1, 0)); });
  std::vector<Ints> buf = {times(1, kCount), times(100, kCount)};
  const sched::RankPlan plans[2] = {exchange(1, kind, kCount), exchange(0, kind, kCount)};

  std::vector<Status> st = run_in_place(net, plans, buf);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << r << ": " << st[static_cast<size_t>(r)].message();
  const bool sum = kind == sched::Kind::RecvReduce;
  EXPECT_EQ(buf[0], sum ? times(101, kCount) : times(100, kCount));
  EXPECT_EQ(buf[1], sum ? times(101, kCount) : times(1, kCount));
  EXPECT_EQ(seen_by_0, (std::vector<uint64_t>{0, 1, 1}));
  EXPECT_EQ(seen_by_1, (std::vector<uint64_t>{0, 0, 0}));
}

INSTANTIATE_TEST_SUITE_P(Exec, InPlaceExchange, ::testing::Values(sched::Kind::RecvReduce, sched::Kind::Recv),
                         [](const ::testing::TestParamInfo<sched::Kind>& i) {
                           return std::string(sched::kind_name(i.param));
                         });

// (b) RecvReduce reduces each piece as it arrives: right after piece k, exactly
// the elements received so far hold the sum and the rest are untouched.
struct PieceCase {
  bool rendezvous;
  size_t piece;  // bytes
  uint64_t count;
};

class PiecewiseReduce : public ::testing::TestWithParam<PieceCase> {};

TEST_P(PiecewiseReduce, EachPieceIsReducedOnArrival) {
  const PieceCase c = GetParam();
  FakeNet net(2, {c.rendezvous, c.piece});
  Ints in0 = times(1, c.count), in1 = times(10, c.count), out0(c.count, -1), out1(c.count, -1);
  std::vector<Ints> after_piece;  // rank 1's output after each piece (hook: rank 1's thread)
  net.set_hook(0, 1, [&](uint64_t, size_t, size_t) { after_piece.push_back(out1); });
  sched::RankPlan p0, p1;
  p0.steps = {send_step(1, send_buf(0, c.count))};
  p1.steps = {recv_reduce_step(0, recv_buf(0, c.count), send_buf(0, c.count))};

  std::vector<Status> st = run_ranks(2, [&](int r) {
    exec::Executor ex(r, net.links_of(r), nullptr);
    exec::Call call = r == 0 ? int_sum_call(p0, in0.data(), out0.data(), 1, 5000)
                             : int_sum_call(p1, in1.data(), out1.data(), 1, 5000);
    return ex.run(call);
  });
  ASSERT_TRUE(st[0].ok()) << st[0].message();
  ASSERT_TRUE(st[1].ok()) << st[1].message();
  EXPECT_EQ(out1, times(11, c.count));
  const size_t bytes = c.count * 4, pieces = (bytes + c.piece - 1) / c.piece;
  ASSERT_EQ(after_piece.size(), pieces);
  for (size_t k = 0; k < pieces; ++k) {
    const size_t have = std::min(bytes, (k + 1) * c.piece) / 4;  // elements received after piece k
    Ints want(c.count, -1);
    for (size_t i = 0; i < have; ++i) want[i] = 11 * static_cast<int32_t>(i + 1);
    EXPECT_EQ(after_piece[k], want) << "after piece " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Exec, PiecewiseReduce,
                         ::testing::Values(PieceCase{false, 12, 7},   // 12 + 12 + 4 B
                                           PieceCase{true, 12, 7},
                                           PieceCase{true, 4, 5},     // one element at a time
                                           PieceCase{false, 20, 13},  // 20 + 20 + 12 B
                                           PieceCase{true, 8, 13}),   // 6 x 8 B + 4 B
                         [](const ::testing::TestParamInfo<PieceCase>& i) {
                           return std::string(i.param.rendezvous ? "rendezvous" : "eager") + "_piece" +
                                  std::to_string(i.param.piece) + "_count" + std::to_string(i.param.count);
                         });

// (c) A local write (Copy or Reduce) into a range that a rendezvous send is still
// reading waits for that send: the peer starts reading 50 ms later and must still
// see the value the range held when the Send step ran. 6 int32, pieces of 8 B.
class WriteAfterSend : public ::testing::TestWithParam<sched::Kind> {};

TEST_P(WriteAfterSend, WaitsForTheSendStillReadingTheRange) {
  const sched::Kind kind = GetParam();
  constexpr uint64_t kCount = 6;
  FakeNet net(2, {true, 8});
  // Rank 0 sends Recv[0,6) (5(i+1)), then overwrites it from Send (7(i+1)).
  Ints in0 = times(7, kCount), out0 = times(5, kCount), in1(kCount, 0), out1(kCount, -1);
  sched::RankPlan p0, p1;
  p0.steps = {send_step(1, recv_buf(0, kCount)),
              kind == sched::Kind::Copy ? copy_step(recv_buf(0, kCount), send_buf(0, kCount))
                                        : reduce_step(recv_buf(0, kCount), send_buf(0, kCount))};
  p1.steps = {recv_step(0, recv_buf(0, kCount))};
  std::vector<Status> st = run_ranks(2, [&](int r) {
    exec::Executor ex(r, net.links_of(r), nullptr);
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    exec::Call call = r == 0 ? int_sum_call(p0, in0.data(), out0.data(), 1, 5000)
                             : int_sum_call(p1, in1.data(), out1.data(), 1, 5000);
    return ex.run(call);
  });
  ASSERT_TRUE(st[0].ok()) << st[0].message();
  ASSERT_TRUE(st[1].ok()) << st[1].message();
  EXPECT_EQ(out1, times(5, kCount));                                          // what was sent
  EXPECT_EQ(out0, kind == sched::Kind::Copy ? times(7, kCount) : times(12, kCount));  // 5 + 7
}

// The write overlaps the send in one element only: Recv[2,5) sent, Recv[4,6) written.
TEST_P(WriteAfterSend, WaitsWhenTheRangesShareOneElement) {
  const sched::Kind kind = GetParam();
  FakeNet net(2, {true, 4});
  Ints in0 = times(7, 6), out0 = times(5, 6), in1(3, 0), out1(3, -1);
  sched::RankPlan p0, p1;
  p0.steps = {send_step(1, recv_buf(2, 3)),
              kind == sched::Kind::Copy ? copy_step(recv_buf(4, 2), send_buf(4, 2))
                                        : reduce_step(recv_buf(4, 2), send_buf(4, 2))};
  p1.steps = {recv_step(0, recv_buf(0, 3))};
  std::vector<Status> st = run_ranks(2, [&](int r) {
    exec::Executor ex(r, net.links_of(r), nullptr);
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    exec::Call call = r == 0 ? int_sum_call(p0, in0.data(), out0.data(), 1, 5000)
                             : int_sum_call(p1, in1.data(), out1.data(), 1, 5000);
    return ex.run(call);
  });
  ASSERT_TRUE(st[0].ok()) << st[0].message();
  ASSERT_TRUE(st[1].ok()) << st[1].message();
  EXPECT_EQ(out1, (Ints{15, 20, 25}));  // 5 * (3, 4, 5): elements 2..4 before the write
  const Ints want0 = kind == sched::Kind::Copy ? Ints{5, 10, 15, 20, 35, 42}
                                               : Ints{5, 10, 15, 20, 60, 72};  // 25 + 35, 30 + 42
  EXPECT_EQ(out0, want0);
}

// A write that does not overlap any send in flight does not wait: rank 1 can read
// rank 0's first message only once rank 0 has queued its second, which comes after
// the write, so waiting on the first send there would never end.
TEST_P(WriteAfterSend, DoesNotWaitForSendsOfOtherRanges) {
  const sched::Kind kind = GetParam();
  FakeNet net(2, {true, 4});
  net.set_gate(0, 1, [&net] { return net.sent(0, 1) >= 2; });
  Ints in0 = times(7, 6), out0 = times(5, 6), in1(6, 0), out1(6, -1);
  sched::RankPlan p0, p1;
  p0.steps = {send_step(1, recv_buf(0, 3)),
              kind == sched::Kind::Copy ? copy_step(recv_buf(3, 3), send_buf(3, 3))
                                        : reduce_step(recv_buf(3, 3), send_buf(3, 3)),
              send_step(1, recv_buf(3, 3))};
  p1.steps = {recv_step(0, recv_buf(0, 3)), recv_step(0, recv_buf(3, 3))};
  std::vector<Status> st = run_ranks(2, [&](int r) {
    exec::Executor ex(r, net.links_of(r), nullptr);
    exec::Call call = r == 0 ? int_sum_call(p0, in0.data(), out0.data(), 1, 2000)
                             : int_sum_call(p1, in1.data(), out1.data(), 1, 2000);
    return ex.run(call);
  });
  ASSERT_TRUE(st[0].ok()) << st[0].message();
  ASSERT_TRUE(st[1].ok()) << st[1].message();
  const Ints want1 = kind == sched::Kind::Copy ? Ints{5, 10, 15, 28, 35, 42}
                                               : Ints{5, 10, 15, 48, 60, 72};  // 20 + 28, 25 + 35, 30 + 42
  EXPECT_EQ(out1, want1);
}

INSTANTIATE_TEST_SUITE_P(Exec, WriteAfterSend, ::testing::Values(sched::Kind::Copy, sched::Kind::Reduce),
                         [](const ::testing::TestParamInfo<sched::Kind>& i) {
                           return std::string(sched::kind_name(i.param));
                         });

// (d) A message whose tag or size differs from the receive's is an error naming
// the sending rank at once, not a wait until the deadline (10 s here).
void expect_mismatch(uint64_t seq0, uint64_t count0, uint64_t seq1, uint64_t count1) {
  FakeNet net(2, {false, 0});
  Ints in0 = times(1, count0), out0(count0), in1(count1), out1(count1, -1);
  sched::RankPlan p0, p1;
  p0.steps = {send_step(1, send_buf(0, count0))};
  p1.steps = {recv_step(0, recv_buf(0, count1))};
  const auto t0 = Clock::now();
  std::vector<Status> st = run_ranks(2, [&](int r) {
    exec::Executor ex(r, net.links_of(r), nullptr);
    exec::Call call = r == 0 ? int_sum_call(p0, in0.data(), out0.data(), seq0, 10000)
                             : int_sum_call(p1, in1.data(), out1.data(), seq1, 10000);
    return ex.run(call);
  });
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_TRUE(st[0].ok()) << st[0].message();  // an eager send completes
  EXPECT_EQ(st[1].code(), weftInvalidUsage) << st[1].message();
  EXPECT_TRUE(contains(st[1].message(), "rank 0")) << st[1].message();
  EXPECT_EQ(out1, Ints(count1, -1));  // nothing landed
}

TEST(ExecutorErrors, TagMismatchNamesThePeer) { expect_mismatch(5, 4, 6, 4); }
TEST(ExecutorErrors, SizeMismatchNamesThePeer) { expect_mismatch(5, 4, 5, 5); }

// (e) Rank 0 dies without sending: rank 1's receive fails naming it, long before
// the 10 s deadline.
TEST(ExecutorErrors, DeadPeerWhileReceiving) {
  FakeNet net(2, {false, 0});
  net.kill(0);
  Ints in(4), out(4, -1);
  sched::RankPlan p;
  p.steps = {recv_step(0, recv_buf(0, 4))};
  exec::Executor ex(1, net.links_of(1), nullptr);
  exec::Call call = int_sum_call(p, in.data(), out.data(), 1, 10000);
  Watchdog dog(30, "DeadPeerWhileReceiving");
  const auto t0 = Clock::now();
  Status st = ex.run(call);
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(st.code(), weftRemoteError) << st.message();
  EXPECT_TRUE(contains(st.message(), "rank 0")) << st.message();
}

// ... or never reads the buffer of a rendezvous send of ours.
TEST(ExecutorErrors, DeadPeerWhileItReadsOurSend) {
  FakeNet net(2, {true, 0});
  net.kill(0);
  Ints in = times(1, 4), out(4);
  sched::RankPlan p;
  p.steps = {send_step(0, send_buf(0, 4))};
  exec::Executor ex(1, net.links_of(1), nullptr);
  exec::Call call = int_sum_call(p, in.data(), out.data(), 1, 10000);
  Watchdog dog(30, "DeadPeerWhileItReadsOurSend");
  const auto t0 = Clock::now();
  Status st = ex.run(call);
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(st.code(), weftRemoteError) << st.message();
  EXPECT_TRUE(contains(st.message(), "rank 0")) << st.message();
}

// (e) A 100 ms deadline ends a wait on a live but silent peer with weftTimeout
// naming that peer, soon after the deadline.
void expect_deadline(const std::function<Status()>& call, const char* what, int peer) {
  Watchdog dog(30, what);
  const auto t0 = Clock::now();
  Status st = call();
  const double took = seconds_since(t0);
  EXPECT_GE(took, 0.1) << what;
  EXPECT_LT(took, 5.0) << what;
  EXPECT_EQ(st.code(), weftTimeout) << what << ": " << st.message();
  EXPECT_TRUE(contains(st.message(), "rank " + std::to_string(peer))) << what << ": " << st.message();
}

TEST(ExecutorErrors, DeadlineWhileReceiving) {
  FakeNet net(2, {false, 0});
  Ints in(4), out(4, -1);
  sched::RankPlan p;
  p.steps = {recv_step(0, recv_buf(0, 4))};
  exec::Executor ex(1, net.links_of(1), nullptr);
  exec::Call call = int_sum_call(p, in.data(), out.data(), 1, 100);
  expect_deadline([&] { return ex.run(call); }, "DeadlineWhileReceiving", 0);
}

TEST(ExecutorErrors, DeadlineWhileThePeerHasNotReadOurSend) {
  FakeNet net(3, {true, 0});
  Ints in = times(1, 4), out(4);
  sched::RankPlan p;
  p.steps = {send_step(2, send_buf(0, 4))};
  exec::Executor ex(1, net.links_of(1), nullptr);
  exec::Call call = int_sum_call(p, in.data(), out.data(), 1, 100);
  expect_deadline([&] { return ex.run(call); }, "DeadlineWhileThePeerHasNotReadOurSend", 2);
}

TEST(ExecutorErrors, DeadlineOfAPointToPointReceive) {
  FakeNet net(3, {false, 0});
  Ints buf(4, -1);
  exec::Executor ex(0, net.links_of(0), nullptr);
  expect_deadline([&] { return ex.run_p2p({exec::P2P{false, 2, buf.data(), 16}}, {}, 100); },
                  "DeadlineOfAPointToPointReceive", 2);
}

// The communicator's own check (abort, a rank lost per the bootstrap) also ends a
// wait; before it, the executor says where it waits (the stuck-call diagnosis).
class FailingHealth final : public exec::Health {
 public:
  Status check() override {
    ++calls;
    return Error(weftRemoteError, "bootstrap: rank 3 lost");
  }
  void waiting(const exec::WaitInfo& w) override {
    where = w;
    what = w.what;
  }
  int calls = 0;
  exec::WaitInfo where;
  std::string what;
};

TEST(ExecutorErrors, HealthCheckEndsTheWait) {
  FakeNet net(2, {false, 0});
  FailingHealth health;
  Ints in(4), out(4, -1);
  sched::RankPlan p;
  p.steps = {recv_step(0, recv_buf(0, 4))};
  exec::Executor ex(1, net.links_of(1), &health);
  exec::Call call = int_sum_call(p, in.data(), out.data(), 1, 10000);
  Watchdog dog(30, "HealthCheckEndsTheWait");
  const auto t0 = Clock::now();
  Status st = ex.run(call);
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(st.code(), weftRemoteError) << st.message();
  EXPECT_TRUE(contains(st.message(), "rank 3 lost")) << st.message();
  EXPECT_GE(health.calls, 1);
  // Rank 1 waits in step 0 of 1, a Recv of 16 bytes from rank 0 of which none came.
  EXPECT_EQ(health.where.seq, 1u);
  EXPECT_EQ(health.where.plan, &p);
  EXPECT_EQ(health.where.step, 0u);
  EXPECT_EQ(health.where.nsteps, 1u);
  EXPECT_EQ(health.where.peer, 0);
  EXPECT_EQ(health.what, "Recv");
  EXPECT_EQ(health.where.bytes, 16u);
  EXPECT_EQ(health.where.bytes_done, 0u);
}

// (f) Point-to-point groups: sends and receives to several peers, posted in a
// different order on every rank, over rendezvous links in 8-byte pieces. The k-th
// message from s to d holds 1000 s + 100 d + 10 k + i (i < 3 + s + d + k), so a
// message matched to the wrong receive has the wrong size or the wrong values.
Ints message(int s, int d, int k) {
  Ints v(static_cast<size_t>(3 + s + d + k));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 1000 * s + 100 * d + 10 * k + static_cast<int32_t>(i);
  return v;
}

struct Op {
  bool send;
  int peer;
  int k;  // the k-th message between the two in that direction
};

TEST(ExecutorP2P, SendsAndReceivesToSeveralPeersInAnyOrder) {
  FakeNet net(3, {true, 8});
  // Group 1: rank 0 sends to 1 twice; everyone else once per direction.
  const std::vector<std::vector<Op>> group1 = {
      {{false, 2, 0}, {true, 1, 0}, {false, 1, 0}, {true, 2, 0}, {true, 1, 1}},
      {{true, 0, 0}, {false, 2, 0}, {false, 0, 0}, {true, 2, 0}, {false, 0, 1}},
      {{false, 0, 0}, {true, 1, 0}, {true, 0, 0}, {false, 1, 0}},
  };
  // Group 2 on the same executors: the counts of messages per peer continue.
  const std::vector<std::vector<Op>> group2 = {
      {{false, 1, 1}, {true, 2, 1}, {true, 1, 2}, {false, 2, 1}},
      {{true, 0, 1}, {false, 0, 2}, {true, 2, 1}, {false, 2, 1}},
      {{true, 1, 1}, {false, 1, 1}, {true, 0, 1}, {false, 0, 1}},
  };
  std::vector<std::vector<Ints>> got1(3), got2(3);
  std::vector<Status> st = run_ranks(3, [&](int r) {
    exec::Executor ex(r, net.links_of(r), nullptr);
    for (int g = 0; g < 2; ++g) {
      const std::vector<Op>& ops = (g == 0 ? group1 : group2)[static_cast<size_t>(r)];
      std::vector<Ints>& got = (g == 0 ? got1 : got2)[static_cast<size_t>(r)];
      std::vector<Ints> sends;
      sends.reserve(ops.size());
      got.clear();
      got.reserve(ops.size());
      std::vector<exec::P2P> p2p;
      for (const Op& o : ops) {
        Ints& b = o.send ? sends.emplace_back(message(r, o.peer, o.k))
                         : got.emplace_back(message(o.peer, r, o.k).size(), -1);
        p2p.push_back({o.send, o.peer, b.data(), b.size() * sizeof(int32_t)});
      }
      Status s = ex.run_p2p(p2p, {}, 5000);
      if (!s.ok()) return s.prefix("group " + std::to_string(g + 1) + ": ");
    }
    return Status::Ok();
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << r << ": " << st[static_cast<size_t>(r)].message();
    for (int g = 0; g < 2; ++g) {
      const std::vector<Op>& ops = (g == 0 ? group1 : group2)[static_cast<size_t>(r)];
      const std::vector<Ints>& got = (g == 0 ? got1 : got2)[static_cast<size_t>(r)];
      size_t j = 0;
      for (const Op& o : ops) {
        if (o.send) continue;
        EXPECT_EQ(got[j++], message(o.peer, r, o.k)) << "group " << g + 1 << " rank " << r;
      }
    }
  }
}

// A batch's local copies (a rank's own part of a gather) are done beside its
// sends and receives, and a batch of copies alone needs no peer.
TEST(ExecutorP2P, LocalCopiesBesideSendsAndReceives) {
  FakeNet net(2, {true, 8});
  std::vector<Ints> gathered = {Ints(6, -1), Ints(6, -1)};  // rank r's own part, then the peer's
  std::vector<Ints> mine = {times(1, 3), times(100, 3)};
  std::vector<Status> st = run_ranks(2, [&](int r) {
    exec::Executor ex(r, net.links_of(r), nullptr);
    Ints& g = gathered[static_cast<size_t>(r)];
    const std::vector<exec::P2P> ops = {{true, 1 - r, mine[static_cast<size_t>(r)].data(), 12},
                                        {false, 1 - r, g.data() + 3, 12}};
    return ex.run_p2p(ops, {{g.data(), mine[static_cast<size_t>(r)].data(), 12}}, 5000);
  });
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << r << ": " << st[static_cast<size_t>(r)].message();
  EXPECT_EQ(gathered[0], (Ints{1, 2, 3, 100, 200, 300}));
  EXPECT_EQ(gathered[1], (Ints{100, 200, 300, 1, 2, 3}));

  Ints src = times(7, 2), dst(2, -1);
  exec::Executor alone(0, net.links_of(0), nullptr);
  ASSERT_TRUE(alone.run_p2p({}, {{dst.data(), src.data(), 8}}, 100).ok());
  EXPECT_EQ(dst, (Ints{7, 14}));
}

// (g) Receives from any source, on one thread: rank 0's receives are posted
// (first advanced) in order and then advanced by hand in any order, while ranks 1 and 2 send one message at a time, so
// which message each receive gets is decided by the rules alone.
struct AnySourceRig {
  FakeNet net{3, {false, 0}};
  std::vector<std::unique_ptr<exec::Executor>> ex;
  AnySourceRig() {
    for (int r = 0; r < 3; ++r) ex.push_back(std::make_unique<exec::Executor>(r, net.links_of(r), nullptr));
  }
  // Rank `from` sends `value` to rank 0 (eager: done at once).
  void send(int from, int32_t value) {
    Ints v{value};
    ASSERT_TRUE(ex[static_cast<size_t>(from)]->run_p2p({exec::P2P{true, 0, v.data(), 4}}, {}, 1000).ok());
  }
  // One pass of rank 0 over `call`: true once it is done.
  bool advance(exec::P2PCall& call) {
    bool done = false;
    Status st = ex[0]->advance_p2p(call, &done);
    EXPECT_TRUE(st.ok()) << st.message();
    return done;
  }
};

exec::P2PCall recv_any(Ints& buf, int* from) {
  return exec::P2PCall({exec::P2P{false, exec::kAnySource, buf.data(), 4, from}}, {}, 1000);
}

exec::P2PCall recv_from(int peer, Ints& buf) {
  return exec::P2PCall({exec::P2P{false, peer, buf.data(), 4}}, {}, 1000);
}

TEST(ExecutorAnySource, TakesTheFirstMessageToArriveFromWhicheverRank) {
  AnySourceRig rig;
  Ints a(1, -1), b(1, -1);
  int from_a = -5, from_b = -5;
  exec::P2PCall ca = recv_any(a, &from_a);
  EXPECT_FALSE(rig.advance(ca));  // nothing sent yet
  rig.send(2, 22);
  EXPECT_TRUE(rig.advance(ca));
  EXPECT_EQ(from_a, 2);
  EXPECT_EQ(a, Ints{22});
  exec::P2PCall cb = recv_any(b, &from_b);
  EXPECT_FALSE(rig.advance(cb));
  rig.send(1, 11);
  EXPECT_TRUE(rig.advance(cb));
  EXPECT_EQ(from_b, 1);
  EXPECT_EQ(b, Ints{11});
}

// Posted first, it matches first (MPI's order), even when the engine advances
// a later receive from the same peer before it.
TEST(ExecutorAnySource, LaterReceivesWaitUntilItHasMatched) {
  AnySourceRig rig;
  Ints a(1, -1), b(1, -1), c(1, -1);
  int from_a = -5, from_c = -5;
  exec::P2PCall ca = recv_any(a, &from_a);
  exec::P2PCall cb = recv_from(1, b);
  exec::P2PCall cc = recv_any(c, &from_c);
  EXPECT_FALSE(rig.advance(ca));
  EXPECT_FALSE(rig.advance(cb));
  EXPECT_FALSE(rig.advance(cc));
  rig.send(1, 11);
  rig.send(1, 12);
  rig.send(2, 22);
  // Neither later receive may take a message while the first waits to match.
  EXPECT_FALSE(rig.advance(cc));
  EXPECT_FALSE(rig.advance(cb));
  EXPECT_TRUE(rig.advance(ca));
  EXPECT_EQ(from_a, 1);
  EXPECT_EQ(a, Ints{11});
  // The receive from 1 was posted before the second one from any rank: 1's next
  // message is its, so the other gets 2's.
  EXPECT_TRUE(rig.advance(cc));
  EXPECT_EQ(from_c, 2);
  EXPECT_EQ(c, Ints{22});
  EXPECT_TRUE(rig.advance(cb));
  EXPECT_EQ(b, Ints{12});
}

TEST(ExecutorAnySource, AnEarlierReceiveFromAPeerKeepsThatPeersMessage) {
  AnySourceRig rig;
  Ints a(1, -1), b(1, -1);
  int from_b = -5;
  exec::P2PCall ca = recv_from(1, a);
  exec::P2PCall cb = recv_any(b, &from_b);
  EXPECT_FALSE(rig.advance(ca));  // posted (started) first
  rig.send(1, 11);
  EXPECT_FALSE(rig.advance(cb));  // 1's message is the earlier receive's
  EXPECT_TRUE(rig.advance(ca));
  EXPECT_EQ(a, Ints{11});
  EXPECT_FALSE(rig.advance(cb));
  rig.send(1, 12);
  EXPECT_TRUE(rig.advance(cb));
  EXPECT_EQ(from_b, 1);
  EXPECT_EQ(b, Ints{12});
}

TEST(ExecutorAnySource, AMessageOfAnotherSizeIsAnErrorNamingTheSender) {
  AnySourceRig rig;
  Ints two{1, 2}, got(1, -1);
  ASSERT_TRUE(rig.ex[2]->run_p2p({exec::P2P{true, 0, two.data(), 8}}, {}, 1000).ok());
  int from = -5;
  Status st = rig.ex[0]->run_p2p({exec::P2P{false, exec::kAnySource, got.data(), 4, &from}}, {}, 1000);
  EXPECT_EQ(st.code(), weftInvalidUsage) << st.message();
  EXPECT_TRUE(contains(st.message(), "recv from rank 2")) << st.message();
  EXPECT_EQ(got, Ints{-1});
}

TEST(ExecutorAnySource, DeadlineSaysItWaitedForAnyRank) {
  AnySourceRig rig;
  Ints got(1, -1);
  int from = -5;
  Watchdog dog(30, "DeadlineSaysItWaitedForAnyRank");
  const auto t0 = Clock::now();
  Status st = rig.ex[0]->run_p2p({exec::P2P{false, exec::kAnySource, got.data(), 4, &from}}, {}, 100);
  EXPECT_GE(seconds_since(t0), 0.1);
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(st.code(), weftTimeout) << st.message();
  EXPECT_TRUE(contains(st.message(), "recv from any rank")) << st.message();
}

}  // namespace
}  // namespace weft::testing
