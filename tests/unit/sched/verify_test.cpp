// The verifier must reject each way a schedule can be wrong, with a message that
// says which rank, which step and what went wrong.
#include <gtest/gtest.h>

#include "algorithms/ring.h"
#include "sched/build_util.h"
#include "sched/verify.h"

namespace weft::sched {
namespace {

Schedule ring_allreduce(int n, uint64_t count, uint64_t slice = 0) {
  BuildArgs a;
  a.coll = Coll::AllReduce;
  a.nranks = n;
  a.count = count;
  a.slice_elems = slice;
  return build_all(a, "ring", algo::ring::allreduce);
}

Schedule empty(Coll coll, int n, uint64_t count, int root = 0) {
  Schedule s;
  s.args.coll = coll;
  s.args.nranks = n;
  s.args.count = count;
  s.args.root = root;
  s.algo = "handmade";
  s.ranks.resize(static_cast<size_t>(n));
  return s;
}

void add(Schedule& s, int rank, Step st) { s.ranks[static_cast<size_t>(rank)].steps.push_back(st); }
Step send(int peer, Range src) { return {Kind::Send, peer, {}, src}; }
Step recv(int peer, Range dst) { return {Kind::Recv, peer, dst, {}}; }
Step recv_reduce(int peer, Range dst, Range src) { return {Kind::RecvReduce, peer, dst, src}; }
Step copy(Range dst, Range src) { return {Kind::Copy, -1, dst, src}; }
Step reduce(Range dst, Range src) { return {Kind::Reduce, -1, dst, src}; }

// A correct two-rank all-reduce: exchange inputs, reduce the peer's into ours.
Schedule pair_allreduce(uint64_t count) {
  Schedule s = empty(Coll::AllReduce, 2, count);
  for (int r = 0; r < 2; ++r) {
    add(s, r, send(1 - r, send_buf(0, count)));
    add(s, r, recv_reduce(1 - r, recv_buf(0, count), send_buf(0, count)));
  }
  return s;
}

#define EXPECT_REJECTS(status, text)                                             \
  do {                                                                           \
    Status st_ = (status);                                                       \
    EXPECT_FALSE(st_.ok());                                                      \
    EXPECT_EQ(st_.code(), weftInternalError);                                    \
    EXPECT_NE(st_.message().find(text), std::string::npos) << st_.message();     \
  } while (0)

TEST(Verify, AcceptsHandmadePair) {
  EXPECT_TRUE(verify_both(pair_allreduce(5)).ok()) << verify_both(pair_allreduce(5)).message();
}

TEST(Verify, AcceptsRingSmall) {
  Status st = verify_both(ring_allreduce(5, 13, 2));
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(Verify, DroppedStepLeavesMessageUnreceived) {
  Schedule s = ring_allreduce(3, 9);
  s.ranks[1].steps.pop_back();  // the last all-gather receive
  Status st = verify(s, false);
  EXPECT_REJECTS(st, "message left unreceived: rank 0 step");
  EXPECT_REJECTS(st, "to rank 1");
}

TEST(Verify, DroppedMiddleStepIsCaught) {
  Schedule s = ring_allreduce(4, 8);
  s.ranks[2].steps.erase(s.ranks[2].steps.begin() + 1);  // first RecvReduce
  EXPECT_REJECTS(verify(s, false), "rank 2 step 1");
}

// Rank 0's first chunk goes to rank 2 instead of 1, so rank 1 pairs its first
// receive with rank 0's next message, which carries another chunk.
TEST(Verify, SwappedPeer) {
  Schedule s = ring_allreduce(3, 6);
  s.ranks[0].steps[0].peer = 2;  // should go to rank 1
  EXPECT_REJECTS(verify(s, false),
                 "rank 1 step 1 (RecvReduce from 0 dst=Recv[0,+2) src=Send[0,+2)): mixed elements at Recv[0]: "
                 "{element 0 from ranks 1} op {element 4 from ranks 0,2}");
}

// A peer that never sends what is awaited: everyone else finishes, rank 1 waits.
TEST(Verify, SwappedPeerOnLastStepDeadlocks) {
  Schedule s = ring_allreduce(3, 6);
  s.ranks[1].steps.back().peer = 2;  // waits for rank 2, which sends only to 0
  Status st = verify(s, false);
  EXPECT_REJECTS(st, "deadlock: no rank can progress; rank 1 waits at step 7 (Recv from 2");
}

TEST(Verify, DoubleReduce) {
  Schedule s = empty(Coll::AllReduce, 2, 4);
  add(s, 0, send(1, send_buf(0, 4)));
  add(s, 0, send(1, send_buf(0, 4)));
  add(s, 1, recv_reduce(0, recv_buf(0, 4), send_buf(0, 4)));
  add(s, 1, recv_reduce(0, recv_buf(0, 4), recv_buf(0, 4)));
  Status st = verify(s, false);
  EXPECT_REJECTS(st, "rank 1 step 1 (RecvReduce from 0 dst=Recv[0,+4) src=Recv[0,+4)): double contribution at Recv[0]");
  EXPECT_REJECTS(st, "repeats ranks 0");
}

TEST(Verify, LocalReduceOfOwnInputTwice) {
  Schedule s = empty(Coll::AllReduce, 1, 3);
  add(s, 0, copy(recv_buf(0, 3), send_buf(0, 3)));
  add(s, 0, reduce(recv_buf(0, 3), send_buf(0, 3)));
  EXPECT_REJECTS(verify(s, false), "rank 0 step 1 (Reduce dst=Recv[0,+3) src=Send[0,+3)): double contribution");
}

TEST(Verify, MixedElements) {
  Schedule s = empty(Coll::AllReduce, 2, 4);
  add(s, 0, send(1, send_buf(0, 2)));
  add(s, 1, recv_reduce(0, recv_buf(2, 2), send_buf(2, 2)));
  EXPECT_REJECTS(verify(s, false), "mixed elements at Recv[2]: {element 2 from ranks 1} op {element 0 from ranks 0}");
}

TEST(Verify, ReadBeforeWrite) {
  Schedule s = empty(Coll::AllReduce, 2, 4);
  add(s, 0, send(1, recv_buf(0, 4)));  // Recv has not been written yet
  add(s, 1, recv(0, recv_buf(0, 4)));
  EXPECT_REJECTS(verify(s, false), "rank 0 step 0 (Send to 1 src=Recv[0,+4)): reads undefined data at Recv[0]");
}

TEST(Verify, ScratchStartsUndefined) {
  Schedule s = empty(Coll::AllReduce, 1, 2);
  s.ranks[0].scratch_count = 2;
  add(s, 0, copy(recv_buf(0, 2), scratch_buf(0, 2)));
  EXPECT_REJECTS(verify(s, false), "reads undefined data at Scratch[0]");
}

TEST(Verify, CountMismatch) {
  Schedule s = pair_allreduce(4);
  s.ranks[0].steps[0].src.count = 3;
  EXPECT_REJECTS(verify(s, false),
                 "rank 1 step 1 (RecvReduce from 0 dst=Recv[0,+4) src=Send[0,+4)): count mismatch: receives 4 "
                 "elements but rank 0 step 0 sends 3");
}

TEST(Verify, DeadlockCycle) {
  Schedule s = empty(Coll::AllReduce, 2, 4);
  for (int r = 0; r < 2; ++r) {  // both receive before sending
    add(s, r, recv_reduce(1 - r, recv_buf(0, 4), send_buf(0, 4)));
    add(s, r, send(1 - r, send_buf(0, 4)));
  }
  Status st = verify(s, false);
  EXPECT_REJECTS(st, "deadlock: no rank can progress; rank 0 waits at step 0 (RecvReduce from 1");
  EXPECT_REJECTS(st, "rank 1 waits at step 0 (RecvReduce from 0");
}

TEST(Verify, RecvFromFinishedPeerDeadlocks) {
  Schedule s = empty(Coll::AllReduce, 2, 1);
  add(s, 0, recv(1, recv_buf(0, 1)));
  EXPECT_REJECTS(verify(s, false), "rank 0 waits at step 0 (Recv from 1 dst=Recv[0,+1))");
}

TEST(Verify, WrongFinalResult) {
  Schedule s = empty(Coll::AllReduce, 2, 3);
  for (int r = 0; r < 2; ++r) add(s, r, copy(recv_buf(0, 3), send_buf(0, 3)));  // never exchanges
  EXPECT_REJECTS(verify(s, false),
                 "wrong result: rank 0 Recv[0] holds {element 0 from ranks 0} but should hold {element 0 from ranks 0-1}");
}

TEST(Verify, UnwrittenResultIsWrong) {
  Schedule s = empty(Coll::AllReduce, 1, 3);
  add(s, 0, copy(recv_buf(0, 2), send_buf(0, 2)));
  EXPECT_REJECTS(verify(s, false), "wrong result: rank 0 Recv[2] holds undefined");
}

TEST(Verify, OutOfBounds) {
  Schedule s = pair_allreduce(4);
  s.ranks[1].steps[1].dst = recv_buf(2, 4);
  EXPECT_REJECTS(verify(s, false), "rank 1 step 1 (RecvReduce from 0 dst=Recv[2,+4) src=Send[0,+4)): out of bounds: Recv has 4 elements");
}

TEST(Verify, ScratchOutOfBounds) {
  Schedule s = empty(Coll::AllReduce, 1, 2);
  s.ranks[0].scratch_count = 1;
  add(s, 0, copy(scratch_buf(0, 2), send_buf(0, 2)));
  EXPECT_REJECTS(verify(s, false), "out of bounds: Scratch has 1 elements");
}

TEST(Verify, WriteToSendBuffer) {
  Schedule s = pair_allreduce(2);
  s.ranks[1].steps[1].dst = send_buf(0, 2);
  EXPECT_REJECTS(verify(s, false), "writes the Send buffer");
}

TEST(Verify, InvalidPeer) {
  Schedule s = pair_allreduce(2);
  s.ranks[0].steps[0].peer = 0;
  EXPECT_REJECTS(verify(s, false), "rank 0 step 0 (Send to 0 src=Send[0,+2)): invalid peer 0");
}

TEST(Verify, ZeroLengthStep) {
  Schedule s = pair_allreduce(2);
  add(s, 0, copy(recv_buf(0, 0), send_buf(0, 0)));
  EXPECT_REJECTS(verify(s, false), "zero-length range");
}

// Valid out of place, but in place the received data clobbers the input that the
// final local reduce still needs.
TEST(Verify, InPlaceAliasingIsChecked) {
  Schedule s = empty(Coll::AllReduce, 2, 3);
  for (int r = 0; r < 2; ++r) {
    add(s, r, send(1 - r, send_buf(0, 3)));
    add(s, r, recv(1 - r, recv_buf(0, 3)));
    add(s, r, reduce(recv_buf(0, 3), send_buf(0, 3)));
  }
  Status out = verify(s, false);
  EXPECT_TRUE(out.ok()) << out.message();
  Status in = verify(s, true);
  EXPECT_REJECTS(in, "in-place: rank ");
  EXPECT_REJECTS(in, " step 2 (Reduce dst=Recv[0,+3) src=Send[0,+3)): src and dst overlap");
}

// The executor's rendezvous rule: a rank that is about to overwrite memory one of
// its sends still reads waits until the peer has received that send. Posting all
// sends and then receiving in place therefore deadlocks in a cycle, although the
// values would be right with buffered sends.
TEST(Verify, OverwritingAnUndeliveredSendWaits) {
  const int n = 3;
  Schedule s = empty(Coll::AllToAll, n, 1);
  for (int r = 0; r < n; ++r) {
    add(s, r, copy(recv_buf(static_cast<uint64_t>(r), 1), send_buf(static_cast<uint64_t>(r), 1)));
    for (int k = 1; k < n; ++k) add(s, r, send((r + k) % n, send_buf(static_cast<uint64_t>((r + k) % n), 1)));
    for (int k = 1; k < n; ++k) {
      const int from = (r - k + n) % n;
      add(s, r, recv(from, recv_buf(static_cast<uint64_t>(from), 1)));
    }
  }
  Status out = verify(s, false);
  EXPECT_TRUE(out.ok()) << out.message();
  Status in = verify(s, true);
  EXPECT_REJECTS(in, "deadlock: no rank can progress; rank 0 waits at step 3 (Recv from 2 dst=Recv[2,+1)) until rank 2 "
                     "receives its step 2 send, which reads the memory this step writes");
}

// A pairwise exchange in place is fine: the peer takes our send in the same round.
TEST(Verify, InPlaceExchangeDoesNotDeadlock) {
  Schedule s = empty(Coll::AllToAll, 2, 2);
  for (int r = 0; r < 2; ++r) {
    const uint64_t mine = static_cast<uint64_t>(r) * 2, theirs = static_cast<uint64_t>(1 - r) * 2;
    add(s, r, copy(recv_buf(mine, 2), send_buf(mine, 2)));
    add(s, r, send(1 - r, send_buf(theirs, 2)));
    add(s, r, recv(1 - r, recv_buf(theirs, 2)));
  }
  Status st = verify_both(s);
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(Verify, InPlaceCopyToItselfIsANoOp) {
  Schedule s = empty(Coll::AllReduce, 1, 3);
  add(s, 0, copy(recv_buf(0, 3), send_buf(0, 3)));
  EXPECT_TRUE(verify_both(s).ok());
}

TEST(Verify, ReduceNonRootMayNotTouchRecv) {
  Schedule s = empty(Coll::Reduce, 2, 2, /*root=*/1);
  add(s, 0, copy(recv_buf(0, 2), send_buf(0, 2)));
  add(s, 0, send(1, recv_buf(0, 2)));
  add(s, 1, recv_reduce(0, recv_buf(0, 2), send_buf(0, 2)));
  EXPECT_REJECTS(verify(s, false), "rank 0 step 0 (Copy dst=Recv[0,+2) src=Send[0,+2)): uses the Recv buffer, which only the root has");
}

TEST(Verify, BroadcastNonRootInputIsUndefined) {
  Schedule s = empty(Coll::Broadcast, 2, 2, /*root=*/1);
  add(s, 0, copy(recv_buf(0, 2), send_buf(0, 2)));
  add(s, 1, copy(recv_buf(0, 2), send_buf(0, 2)));
  EXPECT_REJECTS(verify(s, false), "rank 0 step 0 (Copy dst=Recv[0,+2) src=Send[0,+2)): reads undefined data at Send[0]");
}

TEST(Verify, BadArguments) {
  Schedule s = empty(Coll::AllReduce, 2, 1);
  s.ranks.pop_back();
  EXPECT_REJECTS(verify(s, false), "schedule has 1 rank plans, expected 2");
  Schedule big = empty(Coll::AllReduce, 65, 1);
  EXPECT_REJECTS(verify(big, false), "nranks must be in [1, 64]");
}

}  // namespace
}  // namespace weft::sched
