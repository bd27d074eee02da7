// The stuck-call diagnosis: the rules on hand-made status rows, then a round
// through a real root with ranks as threads (each answers from its status source),
// and one without the root, the ranks asking each other's status listeners.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/diagnosis.h"
#include "bootstrap/socket.h"
#include "tests/unit/bootstrap/helpers.h"

namespace weft::boot::test {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

RankStatus in_call(const char* op, uint64_t seq, int peer, bool timed_out = false, uint32_t step = 3) {
  RankStatus s;
  s.row.state = static_cast<int32_t>(RowState::InCall);
  s.row.seq = seq;
  s.row.peer = peer;
  s.row.step = step;
  s.row.nsteps = 8;
  s.row.bytes = 4000;
  s.row.timed_out = timed_out ? 1 : 0;
  std::snprintf(s.row.op, sizeof s.row.op, "%s", op);
  std::snprintf(s.row.waiting, sizeof s.row.waiting, "%s", "RecvReduce");
  s.who = "host h, pid 1";
  return s;
}
RankStatus with_state(RowState state, uint64_t seq = 0) {
  RankStatus s;
  s.row.state = static_cast<int32_t>(state);
  s.row.seq = seq;
  s.row.peer = -1;
  s.who = "host h, pid 2";
  return s;
}

TEST(Diagnosis, ARankThatDidNotAnswerIsNamedFirst) {
  std::string table;
  std::string line = diagnose({in_call("allreduce", 6, 1, true), in_call("allreduce", 6, 2),
                               with_state(RowState::NoAnswer), in_call("allreduce", 6, 2)},
                              600, &table);
  EXPECT_EQ(line, "rank 2 (host h, pid 2) did not answer within 600 ms: stopped, hung or cut off");
  // One header and one line per rank; the silent rank's line says so.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 5);
  EXPECT_TRUE(contains(table, "no answer")) << table;
  EXPECT_TRUE(contains(table, "timed out")) << table;
}

TEST(Diagnosis, LostAndDepartedRanksAreNamed) {
  std::string table;
  std::string line = diagnose({in_call("allreduce", 6, 1, true), with_state(RowState::Lost),
                               with_state(RowState::Gone)},
                              5, &table);
  EXPECT_TRUE(contains(line, "rank 1 (host h, pid 2) disconnected (died)")) << line;
  EXPECT_TRUE(contains(line, "rank 2 (host h, pid 2) destroyed its communicator")) << line;
}

TEST(Diagnosis, ARankOutsideTheCallHasNotEnteredIt) {
  std::string table;
  std::string line = diagnose({in_call("allreduce", 1234, 3, true), in_call("allreduce", 1234, 2),
                               in_call("allreduce", 1234, 3), with_state(RowState::Idle, 1233)},
                              3, &table);
  EXPECT_EQ(line, "rank 3 (host h, pid 2) has not entered allreduce #1234 (it is outside weft after #1233: "
                  "slow, or it skipped the call)");
  EXPECT_TRUE(contains(table, "after #1233")) << table;
}

// How long it has been outside weft tells a rank frozen or busy for the whole
// deadline from one that left its last call a moment ago.
TEST(Diagnosis, AnIdleRankSaysHowLongItHasBeenOutside) {
  std::string table;
  RankStatus late = with_state(RowState::Idle, 5031);
  late.row.age_ms = 61234;
  std::string line = diagnose({in_call("alltoall", 5032, 1, true), late}, 3, &table);
  EXPECT_EQ(line, "rank 1 (host h, pid 2) has not entered alltoall #5032 (it is outside weft after #5031, for "
                  "61234 ms: slow, or it skipped the call)");
  EXPECT_TRUE(contains(table, "outside weft 61234 ms")) << table;
}

TEST(Diagnosis, ARankIdleAfterTheCallFinishedIt) {
  std::string table;
  std::string line = diagnose({in_call("broadcast", 9, 1, true), with_state(RowState::Idle, 9)}, 3, &table);
  EXPECT_EQ(line, "rank 1 (host h, pid 2) finished broadcast #9 and is idle while the others wait in it");
}

TEST(Diagnosis, RanksInDifferentCallsAreGroupedByCall) {
  std::string table;
  std::string line = diagnose({in_call("allreduce", 7, 1, true), in_call("allreduce", 7, 2),
                               in_call("broadcast", 7, 0), in_call("allreduce", 6, 0)},
                              3, &table);
  EXPECT_EQ(line, "the ranks are in different calls: ranks 0 and 1 are in allreduce #7, rank 3 in allreduce #6, "
                  "rank 2 in broadcast #7");
}

TEST(Diagnosis, TheEndOfTheWaitChainIsSlow) {
  // 0 waits on 1, 1 on 2, 2 on 3, and 3 (in the call) waits on nothing.
  std::string table;
  std::string line = diagnose({in_call("allreduce", 5, 1, true), in_call("allreduce", 5, 2),
                               in_call("allreduce", 5, 3), in_call("allreduce", 5, -1)},
                              3, &table);
  EXPECT_EQ(line, "rank 0 waits on rank 1 (0 -> 1 -> 2 -> 3), and rank 3 (host h, pid 1) waits on nothing in "
                  "allreduce #5: rank 3 is slow (computing, or its data engine is busy)");
}

TEST(Diagnosis, AWaitCycleMeansTheSchedulesDisagree) {
  std::string table;
  std::string line =
      diagnose({in_call("allreduce", 5, 1, true), in_call("allreduce", 5, 2), in_call("allreduce", 5, 0)}, 3, &table);
  EXPECT_EQ(line, "ranks wait on each other in a cycle (0 -> 1 -> 2 -> 0): the ranks' schedules disagree or a "
                  "message was lost");
}

TEST(Diagnosis, NothingStuckWhenEveryRankIsIdle) {
  std::string table;
  EXPECT_EQ(diagnose({with_state(RowState::Idle, 4), with_state(RowState::Idle, 4)}, 1, &table),
            "no rank is stuck: every rank is idle");
}

TEST(Diagnosis, UnterminatedFieldsFromAPeerAreBounded) {
  RankStatus s = in_call("allreduce", 5, -1, true);
  std::memset(s.row.op, 'x', sizeof s.row.op);
  std::memset(s.row.waiting, 'y', sizeof s.row.waiting);
  s.row.state = 77;  // no such state: taken as no answer
  std::string table;
  std::string line = diagnose({s}, 1, &table);
  EXPECT_TRUE(contains(line, "did not answer")) << line;
}

// Through a real root: three ranks, rank 1 idle after #5 while 0 and 2 wait in
// allreduce #6. Rank 0 times out and reports; every rank gets the diagnosis as
// its group's failure, and a dump afterwards still works.
TEST(DiagnosisRound, TheRootGathersEveryRanksRowAndFailsTheGroup) {
  const int n = 3;
  UniqueId id = loopback_root();
  std::atomic<int> ready{0};
  std::vector<std::string> lines(n), failures(n);
  run_ranks(n, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    Status st = Bootstrap::connect(id, rank, n, Deadline::after_ms(20000), &b);
    ASSERT_TRUE(st.ok()) << st.message();
    RankStatus me = rank == 1 ? with_state(RowState::Idle, 5) : in_call("allreduce", 6, rank == 0 ? 1 : 1);
    b->set_status_source([row = me.row] { return row; });
    ASSERT_TRUE(b->barrier(Deadline::after_ms(20000)).ok());  // every source is set
    if (rank == 0) {
      StatusRow mine = me.row;
      mine.timed_out = 1;
      lines[0] = b->diagnose(mine, ReportKind::Timeout, Deadline::after_ms(10000));
    }
    // Every rank's group fails with the diagnosis (rank 0's at once).
    Deadline d = Deadline::after_ms(10000);
    while (b->poll().ok() && !d.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    failures[static_cast<size_t>(rank)] = b->poll().message();
    EXPECT_EQ(b->poll().code(), weftTimeout);
    // A second report gets the same diagnosis back without a new round.
    if (rank == 2) lines[2] = b->diagnose(me.row, ReportKind::Timeout, Deadline::after_ms(10000));
    b->set_status_source(nullptr);
  });
  const std::string want = "rank 1 (host ";
  EXPECT_TRUE(contains(lines[0], want) && contains(lines[0], "has not entered allreduce #6")) << lines[0];
  EXPECT_EQ(lines[2], lines[0]);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(failures[static_cast<size_t>(r)], "diagnosis: " + lines[0]) << "rank " << r;
}

// A dump fails nobody, and a rank without a status source (its communicator
// gone) is shown as having left.
TEST(DiagnosisRound, ADumpFailsNobody) {
  const int n = 2;
  UniqueId id = loopback_root();
  std::string line;
  run_ranks(n, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_TRUE(Bootstrap::connect(id, rank, n, Deadline::after_ms(20000), &b).ok());
    if (rank == 0) b->set_status_source([] { return in_call("allgather", 3, 1).row; });
    ASSERT_TRUE(b->barrier(Deadline::after_ms(20000)).ok());
    if (rank == 0) line = b->diagnose(in_call("allgather", 3, 1).row, ReportKind::Dump, Deadline::after_ms(10000));
    ASSERT_TRUE(b->barrier(Deadline::after_ms(20000)).ok());
    EXPECT_TRUE(b->poll().ok()) << b->poll().message();
    b->set_status_source(nullptr);
  });
  EXPECT_TRUE(contains(line, "rank 1 (host ") && contains(line, "destroyed its communicator")) << line;
}

// The root stops after every rank joined: rank 0's report finds no root, so it
// asks ranks 1 and 2 directly, and blames rank 1, which has not entered the call.
TEST(DiagnosisRound, WithoutTheRootTheRanksAskEachOther) {
  const int n = 3;
  UniqueId id = loopback_root();
  std::atomic<int> joined{0};
  std::atomic<bool> diagnosed{false};
  std::string line;
  run_ranks(n, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_TRUE(Bootstrap::connect(id, rank, n, Deadline::after_ms(20000), &b).ok());
    RankStatus me = rank == 1 ? with_state(RowState::Idle, 5) : in_call("allreduce", 6, rank == 0 ? 1 : 1);
    b->set_status_source([row = me.row] { return row; });
    ASSERT_TRUE(b->barrier(Deadline::after_ms(20000)).ok());
    joined.fetch_add(1);
    if (rank == 0) {
      while (joined.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      stop_root(id);
      Deadline gone = Deadline::after_ms(5000);
      while (b->poll().ok() && !gone.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      StatusRow mine = me.row;
      mine.timed_out = 1;
      line = b->diagnose(mine, ReportKind::Timeout, Deadline::after_ms(3000));
      diagnosed.store(true);
    }
    // The others' reader threads answer until rank 0 has its diagnosis.
    Deadline d = Deadline::after_ms(10000);
    while (!diagnosed.load() && !d.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    b->set_status_source(nullptr);
  });
  EXPECT_TRUE(contains(line, "rank 1 (host ") && contains(line, "has not entered allreduce #6")) << line;
  EXPECT_TRUE(contains(line, "asked rank to rank") && contains(line, "lost connection to the bootstrap root")) << line;
}

// A status listener answers the job's secret only: a stranger's connection is
// closed without a word, and the job goes on.
TEST(DiagnosisRound, AStatusListenerAnswersTheJobsSecretOnly) {
  const int n = 2;
  UniqueId id = loopback_root();
  std::atomic<bool> asked{false};
  run_ranks(n, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_TRUE(Bootstrap::connect(id, rank, n, Deadline::after_ms(20000), &b).ok());
    b->set_status_source([] { return in_call("broadcast", 9, 0).row; });
    ASSERT_TRUE(b->barrier(Deadline::after_ms(20000)).ok());
    if (rank == 0) {
      std::string where = b->status_address(1), host;
      uint16_t port = 0;
      SockAddr addr;
      ASSERT_TRUE(split_host_port(where, &host, &port) && parse_numeric(host, port, &addr)) << where;
      auto ask = [&](const uint8_t* secret, StatusAnswer* out) {
        Fd fd;
        if (!connect_retry(addr, 100, Deadline::after_ms(2000), &fd).ok()) return -1;
        StatusAsk q{};
        std::memcpy(q.secret, secret, sizeof q.secret);
        if (!send_all(fd.get(), &q, sizeof q, Deadline::after_ms(1000), "ask").ok()) return -1;
        size_t got = 0;
        Deadline d = Deadline::after_ms(2000);
        int err = 0;
        while (got < sizeof *out && !d.expired()) {
          ssize_t k = recv_some(fd.get(), reinterpret_cast<char*>(out) + got, sizeof *out - got, &err);
          if (k > 0) got += static_cast<size_t>(k);
          else if (k == 0 || err != 0 || !wait_readable(fd.get(), d, &err)) break;
        }
        return static_cast<int>(got);
      };
      uint8_t wrong[16];
      std::memcpy(wrong, id.secret.bytes, sizeof wrong);
      wrong[0] ^= 1;
      StatusAnswer ans{};
      EXPECT_EQ(ask(wrong, &ans), 0) << "a stranger got an answer";
      ASSERT_EQ(ask(id.secret.bytes, &ans), static_cast<int>(sizeof ans));
      EXPECT_STREQ(ans.row.op, "broadcast");
      EXPECT_EQ(ans.row.seq, 9u);
      asked.store(true);
    }
    Deadline d = Deadline::after_ms(10000);
    while (!asked.load() && !d.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_TRUE(b->barrier(Deadline::after_ms(20000)).ok()) << "the job did not go on";
    b->set_status_source(nullptr);
  });
}

}  // namespace
}  // namespace weft::boot::test
