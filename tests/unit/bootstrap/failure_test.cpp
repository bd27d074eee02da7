// Failures: strangers, mismatched arguments, lost ranks and roots, aborts and
// deadlines. Ranks are threads, or forked processes where one has to die.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/log.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "tests/unit/bootstrap/helpers.h"

namespace weft::boot::test {
namespace {

using std::chrono::milliseconds;

// Runs body in a child process that cannot outlive 30 s; returns its pid.
pid_t fork_rank(const std::function<int()>& body) {
  // The child inherits every lock held at the fork, also by the root's thread:
  // the logger's one-time setup is done here first, so that the thread is not
  // inside it (a child whose first log line waited on it hung until its alarm,
  // when a test ran alone).
  (void)log::enabled(log::Level::Warn, log::Subsys::BOOT);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    int rc = body();
    _exit(rc);
  }
  return pid;
}

// Waits for the child up to timeout_ms, then kills it; always reaps. Returns
// the exit status (or -signal).
int reap(pid_t pid, int timeout_ms = 10000) {
  auto until = Clock::now() + milliseconds(timeout_ms);
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return -1000;
    if (Clock::now() > until) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// Polls until poll() fails or limit_ms pass; returns the status and the time taken.
Status poll_until_error(Bootstrap& b, int limit_ms, int64_t* took_ms) {
  auto start = Clock::now();
  Status st;
  while (Clock::now() - start < milliseconds(limit_ms)) {
    st = b.poll();
    if (!st.ok()) break;
    std::this_thread::sleep_for(milliseconds(2));
  }
  *took_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  return st;
}

bool contains(const Status& st, const std::string& s) { return st.message().find(s) != std::string::npos; }

TEST(BootstrapFailure, WrongSecretIsDroppedAndLogged) {
  UniqueId id = loopback_root();
  UniqueId stranger = id;
  stranger.secret.bytes[0] ^= 0xff;
  ::testing::internal::CaptureStderr();
  std::atomic<int> ok{0};
  std::atomic<bool> stranger_done{false};
  run_ranks(3, [&](int t) {
    std::unique_ptr<Bootstrap> b;
    if (t == 2) {
      // Same rank number as a real one: were it accepted, it would break the job.
      Status st = Bootstrap::connect(stranger, 0, 2, Deadline::after_ms(3000), &b);
      stranger_done = true;
      EXPECT_FALSE(st.ok());
      EXPECT_EQ(st.code(), weftRemoteError) << st.message();
      EXPECT_TRUE(contains(st, "wrong job secret")) << st.message();
      return;
    }
    if (t == 1) std::this_thread::sleep_for(milliseconds(200));  // let the stranger in first
    Status st = Bootstrap::connect(id, t, 2, Deadline::after_ms(10000), &b);
    ASSERT_TRUE(st.ok()) << st.message();
    int v = t, all[2];
    st = b->allgather(&v, sizeof v, all, Deadline::after_ms(10000));
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(all[1], 1);
    ++ok;
    // Keep the root up until the stranger has been turned away.
    while (!stranger_done) std::this_thread::sleep_for(milliseconds(5));
  });
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(ok.load(), 2);
  EXPECT_NE(err.find("wrong job secret"), std::string::npos) << err;
  EXPECT_NE(err.find("127.0.0.1:"), std::string::npos) << err;  // names the remote address
}

TEST(BootstrapFailure, GarbageConnectionIsDropped) {
  UniqueId id = loopback_root();
  SockAddr addr;
  ASSERT_TRUE(parse_numeric(id.host, id.port, &addr));
  Fd raw;
  ASSERT_TRUE(connect_retry(addr, 50, Deadline::after_ms(3000), &raw).ok());
  const char junk[] = "GET / HTTP/1.0\r\nHost: x\r\n\r\nand some more bytes to fill a header";
  ASSERT_TRUE(send_all(raw.get(), junk, sizeof junk, Deadline::after_ms(1000), "junk").ok());
  // The root closes it: we read EOF.
  int err = 0;
  ASSERT_TRUE(wait_readable(raw.get(), Deadline::after_ms(3000), &err));
  char buf[16];
  EXPECT_LE(recv_some(raw.get(), buf, sizeof buf, &err), 0);
  // A well-formed header announcing a huge hello: dropped before it is buffered.
  Fd big;
  ASSERT_TRUE(connect_retry(addr, 50, Deadline::after_ms(3000), &big).ok());
  MsgHeader h{kWireMagic, static_cast<uint32_t>(MsgType::Hello), 1u << 29, 0, 0, 0, 0};
  ASSERT_TRUE(send_all(big.get(), &h, sizeof h, Deadline::after_ms(1000), "big").ok());
  ASSERT_TRUE(wait_readable(big.get(), Deadline::after_ms(3000), &err));
  EXPECT_LE(recv_some(big.get(), buf, sizeof buf, &err), 0);
  run_ranks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    Status st = Bootstrap::connect(id, rank, 2, Deadline::after_ms(10000), &b);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(b->barrier(Deadline::after_ms(10000)).ok());
  });
}

TEST(BootstrapFailure, NranksMismatchFailsEveryRank) {
  UniqueId id = loopback_root();
  std::atomic<int> failed{0};
  run_ranks(3, [&](int rank) {
    int n = rank == 2 ? 4 : 3;
    if (rank == 2) std::this_thread::sleep_for(milliseconds(100));
    std::unique_ptr<Bootstrap> b;
    Status st = Bootstrap::connect(id, rank, n, Deadline::after_ms(10000), &b);
    EXPECT_EQ(st.code(), weftInvalidUsage) << st.message();
    EXPECT_TRUE(contains(st, "nranks=3")) << st.message();
    EXPECT_TRUE(contains(st, "nranks=4")) << st.message();
    failed += !st.ok();
  });
  EXPECT_EQ(failed.load(), 3);
  stop_root(id);
}

TEST(BootstrapFailure, DuplicateRankIsRejected) {
  UniqueId id = loopback_root();
  std::atomic<int> failed{0};
  run_ranks(2, [&](int) {
    std::unique_ptr<Bootstrap> b;
    Status st = Bootstrap::connect(id, 0, 2, Deadline::after_ms(10000), &b);
    EXPECT_EQ(st.code(), weftInvalidArgument) << st.message();
    EXPECT_TRUE(contains(st, "rank 0 joined twice")) << st.message();
    failed += !st.ok();
  });
  EXPECT_EQ(failed.load(), 2);
  stop_root(id);
}

TEST(BootstrapFailure, RankOutOfRangeIsRejected) {
  UniqueId id = loopback_root();
  std::unique_ptr<Bootstrap> b;
  Status st = Bootstrap::connect(id, 3, 3, Deadline::after_ms(1000), &b);
  EXPECT_EQ(st.code(), weftInvalidArgument) << st.message();
  st = Bootstrap::connect(id, -1, 3, Deadline::after_ms(1000), &b);
  EXPECT_EQ(st.code(), weftInvalidArgument) << st.message();
  stop_root(id);
}

TEST(BootstrapFailure, OperationMismatchNamesTheRanks) {
  UniqueId id = loopback_root();
  run_ranks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_TRUE(Bootstrap::connect(id, rank, 2, Deadline::after_ms(10000), &b).ok());
    char buf[16] = {0}, all[32];
    Status st = rank == 0 ? b->allgather(buf, 8, all, Deadline::after_ms(10000))
                          : b->barrier(Deadline::after_ms(10000));
    EXPECT_EQ(st.code(), weftInvalidUsage) << st.message();
    EXPECT_TRUE(contains(st, "rank 0")) << st.message();
    EXPECT_TRUE(contains(st, "rank 1")) << st.message();
    EXPECT_TRUE(contains(st, "barrier")) << st.message();
    EXPECT_TRUE(contains(st, "allgather")) << st.message();
    // The job is over: later calls and poll() repeat the error.
    EXPECT_EQ(b->poll().code(), weftInvalidUsage);
  });
}

TEST(BootstrapFailure, SizeMismatchNamesBothSizes) {
  UniqueId id = loopback_root();
  run_ranks(3, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_TRUE(Bootstrap::connect(id, rank, 3, Deadline::after_ms(10000), &b).ok());
    char buf[16] = {0}, all[64];
    Status st = b->allgather(buf, rank == 2 ? 16 : 8, all, Deadline::after_ms(10000));
    EXPECT_EQ(st.code(), weftInvalidUsage) << st.message();
    EXPECT_TRUE(contains(st, "16 bytes")) << st.message();
    EXPECT_TRUE(contains(st, "8 bytes")) << st.message();
  });
}

TEST(BootstrapFailure, JoinTimesOutWhenARankNeverArrives) {
  UniqueId id = loopback_root();
  auto start = Clock::now();
  run_ranks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    Status st = Bootstrap::connect(id, rank, 3, Deadline::after_ms(500), &b);
    EXPECT_EQ(st.code(), weftTimeout) << st.message();
    EXPECT_TRUE(contains(st, "join")) << st.message();
    EXPECT_TRUE(contains(st, "all 3 ranks")) << st.message();
    // The other rank that timed out may already have left: "rank 2" or "ranks 0,2".
    EXPECT_TRUE(contains(st, "has not heard from rank")) << st.message();
    EXPECT_EQ(st.message().back(), '2') << st.message();
  });
  EXPECT_LT(Clock::now() - start, milliseconds(3000));
  stop_root(id);
}

TEST(BootstrapFailure, ConnectTimesOutWithoutARoot) {
  // A port nobody listens on: refused connections are retried until the deadline.
  UniqueId id = loopback_root();
  stop_root(id);
  auto start = Clock::now();
  std::unique_ptr<Bootstrap> b;
  Status st = Bootstrap::connect(id, 0, 2, Deadline::after_ms(400), &b);
  EXPECT_EQ(st.code(), weftTimeout) << st.message();
  EXPECT_TRUE(contains(st, "connect")) << st.message();
  EXPECT_LT(Clock::now() - start, milliseconds(3000));
}

TEST(BootstrapFailure, AllgatherTimesOutWhenARankStaysAway) {
  UniqueId id = loopback_root();
  std::atomic<bool> done{false};
  run_ranks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_TRUE(Bootstrap::connect(id, rank, 2, Deadline::after_ms(10000), &b).ok());
    if (rank == 1) {
      while (!done) std::this_thread::sleep_for(milliseconds(5));
      return;
    }
    int v = 0, all[2];
    auto start = Clock::now();
    Status st = b->allgather(&v, sizeof v, all, Deadline::after_ms(300));
    done = true;
    EXPECT_EQ(st.code(), weftTimeout) << st.message();
    EXPECT_TRUE(contains(st, "allgather")) << st.message();
    EXPECT_TRUE(contains(st, "all 2 ranks")) << st.message();
    EXPECT_TRUE(contains(st, "rank 1 has not called allgather #0 yet")) << st.message();
    // A reply that comes late must not be taken for a later call's: the job is over.
    EXPECT_EQ(b->poll().code(), weftTimeout);
    EXPECT_LT(Clock::now() - start, milliseconds(2000));
  });
}

TEST(BootstrapFailure, AbortReasonReachesEveryRank) {
  UniqueId id = loopback_root();
  run_ranks(3, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_TRUE(Bootstrap::connect(id, rank, 3, Deadline::after_ms(10000), &b).ok());
    if (rank == 1) {
      b->abort("out of memory on GPU 3");
      EXPECT_EQ(b->poll().code(), weftRemoteError);
      EXPECT_EQ(b->barrier(Deadline::after_ms(1000)).code(), weftRemoteError);
      return;
    }
    int64_t took = 0;
    Status st = poll_until_error(*b, 2000, &took);
    EXPECT_EQ(st.code(), weftRemoteError) << st.message();
    EXPECT_TRUE(contains(st, "out of memory on GPU 3")) << st.message();
    EXPECT_TRUE(contains(st, "rank 1")) << st.message();
    EXPECT_LT(took, 2000);
  });
}

TEST(BootstrapFailure, AbortUnblocksRanksWaitingInAllgather) {
  UniqueId id = loopback_root();
  run_ranks(3, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_TRUE(Bootstrap::connect(id, rank, 3, Deadline::after_ms(10000), &b).ok());
    if (rank == 2) {
      std::this_thread::sleep_for(milliseconds(100));
      b->abort("bad input shard");
      return;
    }
    int v = rank, all[3];
    auto start = Clock::now();
    Status st = b->allgather(&v, sizeof v, all, Deadline::after_ms(10000));
    EXPECT_EQ(st.code(), weftRemoteError) << st.message();
    EXPECT_TRUE(contains(st, "bad input shard")) << st.message();
    EXPECT_TRUE(contains(st, "rank 2")) << st.message();
    EXPECT_LT(Clock::now() - start, milliseconds(2000));
  });
}

// A rank process that joins, takes part in one all-gather and dies without a goodbye.
int dying_rank(const UniqueId& id, int rank, int n) {
  std::unique_ptr<Bootstrap> b;
  if (!Bootstrap::connect(id, rank, n, Deadline::after_ms(10000), &b).ok()) return 2;
  int v = rank, all[8];
  if (!b->allgather(&v, sizeof v, all, Deadline::after_ms(10000)).ok()) return 3;
  _exit(0);  // no destructor: the socket closes with the process
}

TEST(BootstrapFailure, DeadRankIsReportedByPoll) {
  UniqueId id = loopback_root();
  const int n = 3;
  pid_t child = fork_rank([&] { return dying_rank(id, 2, n); });
  ASSERT_GT(child, 0);
  run_ranks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    Status st = Bootstrap::connect(id, rank, n, Deadline::after_ms(10000), &b);
    ASSERT_TRUE(st.ok()) << st.message();
    int v = rank, all[3];
    ASSERT_TRUE(b->allgather(&v, sizeof v, all, Deadline::after_ms(10000)).ok());
    int64_t took = 0;
    st = poll_until_error(*b, 2000, &took);
    EXPECT_EQ(st.code(), weftRemoteError) << st.message();
    EXPECT_TRUE(contains(st, "rank 2 (host ")) << st.message();
    EXPECT_TRUE(contains(st, "pid " + std::to_string(child))) << st.message();
    EXPECT_TRUE(contains(st, "disconnected from the bootstrap")) << st.message();
    EXPECT_LT(took, 2000);
  });
  EXPECT_EQ(reap(child), 0);
}

// Recovery: the survivors learn who is gone (lost_ranks), then meet at the lowest
// survivor's standby socket under a new secret and work as a new job of two; the
// same standby socket cannot serve a second shrink.
TEST(BootstrapRecovery, SurvivorsOfADeadRankMeetAtTheLeadersStandbySocket) {
  UniqueId id = loopback_root();
  const int n = 3;
  pid_t child = fork_rank([&] { return dying_rank(id, 1, n); });
  ASSERT_GT(child, 0);
  const Secret secret = random_secret();
  UniqueId fresh[2];
  run_ranks(2, [&](int i) {
    const int rank = i == 0 ? 0 : 2;  // the survivors
    std::unique_ptr<Bootstrap> b;
    Status st = Bootstrap::connect(id, rank, n, Deadline::after_ms(10000), &b);
    ASSERT_TRUE(st.ok()) << st.message();
    int v = rank, all[3];
    st = b->allgather(&v, sizeof v, all, Deadline::after_ms(10000));
    ASSERT_TRUE(st.ok()) << st.message();
    int64_t took = 0;
    EXPECT_EQ(poll_until_error(*b, 2000, &took).code(), weftRemoteError);
    EXPECT_EQ(b->lost_ranks(), std::vector<int>{1});
    st = b->shrink_root(0, secret, &fresh[i]);
    ASSERT_TRUE(st.ok()) << st.message();
    std::unique_ptr<Bootstrap> nb;
    st = Bootstrap::connect(fresh[i], i, 2, Deadline::after_ms(10000), &nb);
    ASSERT_TRUE(st.ok()) << st.message();
    int mine = 100 + rank, both[2] = {-1, -1};
    ASSERT_TRUE(nb->allgather(&mine, sizeof mine, both, Deadline::after_ms(10000)).ok());
    EXPECT_EQ(both[0], 100);
    EXPECT_EQ(both[1], 102);
    ASSERT_TRUE(nb->barrier(Deadline::after_ms(10000)).ok());
    if (rank == 0) {
      UniqueId again;
      st = b->shrink_root(0, random_secret(), &again);
      EXPECT_EQ(st.code(), weftInvalidUsage) << st.message();
      EXPECT_TRUE(contains(st, "standby socket already serves")) << st.message();
    }
  });
  // Both computed the same meeting place: rank 0's standby socket, not the old root.
  EXPECT_EQ(std::string(fresh[0].host), std::string(fresh[1].host));
  EXPECT_EQ(fresh[0].port, fresh[1].port);
  EXPECT_NE(fresh[0].port, id.port);
  EXPECT_EQ(reap(child), 0);
}

TEST(BootstrapFailure, DeadRankIsReportedEvenIfItsForkedChildLivesOn) {
  // A rank process that forked a helper (a data loader worker, say) and then
  // died: the helper's copy of the socket must not keep the rank "alive".
  prctl(PR_SET_CHILD_SUBREAPER, 1);  // so that we can reap the orphaned helper
  UniqueId id = loopback_root();
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t child = fork_rank([&] {
    close(p[0]);
    std::unique_ptr<Bootstrap> b;
    if (!Bootstrap::connect(id, 1, 2, Deadline::after_ms(10000), &b).ok()) return 2;
    if (!b->barrier(Deadline::after_ms(10000)).ok()) return 3;
    pid_t helper = fork();
    if (helper == 0) {
      sleep(5);
      _exit(0);
    }
    if (write(p[1], &helper, sizeof helper) != sizeof helper) return 4;
    _exit(0);
  });
  ASSERT_GT(child, 0);
  close(p[1]);
  std::unique_ptr<Bootstrap> b;
  ASSERT_TRUE(Bootstrap::connect(id, 0, 2, Deadline::after_ms(10000), &b).ok());
  ASSERT_TRUE(b->barrier(Deadline::after_ms(10000)).ok());
  pid_t helper = -1;
  ASSERT_EQ(read(p[0], &helper, sizeof helper), static_cast<ssize_t>(sizeof helper));
  close(p[0]);
  int64_t took = 0;
  Status st = poll_until_error(*b, 2000, &took);
  EXPECT_EQ(st.code(), weftRemoteError) << st.message();
  EXPECT_TRUE(contains(st, "rank 1 (host ")) << st.message();
  EXPECT_LT(took, 2000);
  EXPECT_EQ(reap(child), 0);
  kill(helper, SIGKILL);
  reap(helper);
}

TEST(BootstrapFailure, DeadRankUnblocksBarrier) {
  UniqueId id = loopback_root();
  const int n = 4;
  pid_t child = fork_rank([&] { return dying_rank(id, 0, n); });
  ASSERT_GT(child, 0);
  run_ranks(3, [&](int t) {
    int rank = t + 1;
    std::unique_ptr<Bootstrap> b;
    ASSERT_TRUE(Bootstrap::connect(id, rank, n, Deadline::after_ms(10000), &b).ok());
    int v = rank, all[4];
    ASSERT_TRUE(b->allgather(&v, sizeof v, all, Deadline::after_ms(10000)).ok());
    auto start = Clock::now();
    Status st = b->barrier(Deadline::after_ms(10000));
    EXPECT_EQ(st.code(), weftRemoteError) << st.message();
    EXPECT_TRUE(contains(st, "rank 0")) << st.message();
    EXPECT_LT(Clock::now() - start, milliseconds(2000));
  });
  EXPECT_EQ(reap(child), 0);
}

TEST(BootstrapProcesses, JoinAndAllgatherAcrossProcesses) {
  UniqueId id = loopback_root();
  const int n = 4;
  std::vector<pid_t> children;
  for (int rank = 1; rank < n; ++rank)
    children.push_back(fork_rank([&, rank] {
      std::unique_ptr<Bootstrap> b;
      if (!Bootstrap::connect(id, rank, n, Deadline::after_ms(10000), &b).ok()) return 2;
      int32_t pid = getpid(), all[n];
      if (!b->allgather(&pid, sizeof pid, all, Deadline::after_ms(10000)).ok()) return 3;
      if (all[rank] != pid) return 4;
      if (!b->barrier(Deadline::after_ms(10000)).ok()) return 5;
      return 0;  // the destructor says goodbye
    }));
  std::unique_ptr<Bootstrap> b;
  Status st = Bootstrap::connect(id, 0, n, Deadline::after_ms(10000), &b);
  ASSERT_TRUE(st.ok()) << st.message();
  int32_t pid = getpid(), all[n];
  st = b->allgather(&pid, sizeof pid, all, Deadline::after_ms(10000));
  ASSERT_TRUE(st.ok()) << st.message();
  for (int r = 1; r < n; ++r) EXPECT_EQ(all[r], children[r - 1]);
  EXPECT_TRUE(b->barrier(Deadline::after_ms(10000)).ok());
  b.reset();  // waits for the children's goodbyes: nobody was lost
  for (pid_t c : children) EXPECT_EQ(reap(c), 0);
  EXPECT_EQ(find_root_service(id), nullptr);
}

TEST(BootstrapFailure, LostRootIsReportedByPoll) {
  // The root and rank 0 live in a child that dies; rank 1 must hear of it.
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t child = fork_rank([&] {
    close(p[0]);
    UniqueId id{};
    if (!create_root_at("127.0.0.1", 0, random_secret(), &id).ok()) return 2;
    if (write(p[1], &id, sizeof id) != sizeof id) return 3;
    std::unique_ptr<Bootstrap> b;
    if (!Bootstrap::connect(id, 0, 2, Deadline::after_ms(10000), &b).ok()) return 4;
    if (!b->barrier(Deadline::after_ms(10000)).ok()) return 5;
    // Let the root thread finish sending the barrier's reply to rank 1, then die
    // without any goodbye.
    std::this_thread::sleep_for(milliseconds(200));
    _exit(0);
  });
  ASSERT_GT(child, 0);
  close(p[1]);
  UniqueId id{};
  ASSERT_EQ(read(p[0], &id, sizeof id), static_cast<ssize_t>(sizeof id));
  close(p[0]);
  std::unique_ptr<Bootstrap> b;
  ASSERT_TRUE(Bootstrap::connect(id, 1, 2, Deadline::after_ms(10000), &b).ok());
  ASSERT_TRUE(b->barrier(Deadline::after_ms(10000)).ok());
  int64_t took = 0;
  Status st = poll_until_error(*b, 2000, &took);
  EXPECT_EQ(st.code(), weftRemoteError) << st.message();
  EXPECT_TRUE(contains(st, "lost connection to the bootstrap root")) << st.message();
  EXPECT_LT(took, 2000);
  EXPECT_EQ(reap(child), 0);
}

TEST(BootstrapFailure, RootProcessWaitsForEveryRankToLeave) {
  // Rank 1 in another process (a fork: the root's registry is per process).
  UniqueId id = loopback_root();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::unique_ptr<Bootstrap> b;
    if (!Bootstrap::connect(id, 1, 2, Deadline::after_ms(10000), &b).ok()) _exit(1);
    std::this_thread::sleep_for(milliseconds(300));
    // Rank 0 left cleanly: no "lost" notice, and the root still answers.
    bool answered = b->poll().ok();
    b.reset();
    _exit(answered ? 0 : 2);
  }
  std::unique_ptr<Bootstrap> b;
  ASSERT_TRUE(Bootstrap::connect(id, 0, 2, Deadline::after_ms(10000), &b).ok());
  auto start = Clock::now();
  b.reset();  // waits: rank 1 is still connected
  int64_t waited = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank 1's process: status " << status;
  EXPECT_GE(waited, 250);
  EXPECT_EQ(find_root_service(id), nullptr);
}

TEST(BootstrapFailure, RanksOfTheRootProcessLeaveWithoutWaitingForEachOther) {
  // weftCommInitAll: every rank in the root's process, leaving one after
  // another on one thread; only the last to leave waits (for nobody).
  UniqueId id = loopback_root();
  std::unique_ptr<Bootstrap> b[3];
  run_ranks(3, [&](int rank) { ASSERT_TRUE(Bootstrap::connect(id, rank, 3, Deadline::after_ms(10000), &b[rank]).ok()); });
  auto start = Clock::now();
  for (auto& r : b) r.reset();
  EXPECT_LT(std::chrono::duration_cast<milliseconds>(Clock::now() - start).count(), 2000);
  EXPECT_EQ(find_root_service(id), nullptr);
}

TEST(BootstrapFailure, OperationAfterARankLeftFails) {
  UniqueId id = loopback_root();
  run_ranks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_TRUE(Bootstrap::connect(id, rank, 2, Deadline::after_ms(10000), &b).ok());
    if (rank == 1) return;  // goodbye at once
    std::this_thread::sleep_for(milliseconds(200));
    Status st = b->barrier(Deadline::after_ms(3000));
    EXPECT_EQ(st.code(), weftInvalidUsage) << st.message();
    EXPECT_TRUE(contains(st, "rank 1 has already left")) << st.message();
  });
}

}  // namespace
}  // namespace weft::boot::test
