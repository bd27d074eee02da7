// One rank misbehaves at the sixth all-reduce and the others must be told who
// holds them up (the stuck-call diagnosis). Run under weft-run:
//
//   weft-stuck-call MODE VICTIM
//
//   skip   the victim skips all-reduce #6 and idles outside weft
//   sleep  the victim sleeps (outside weft) past the deadline before #6
//   other  the victim calls all-gather where the others call all-reduce #6
//   stop   the victim stops itself (SIGSTOP) before #6 (the driver kills it)
//   dump   the victim, outside weft while the others wait in #6, calls
//          weftCommDump, then joins #6: nothing fails
//   usr1   the same with SIGUSR1 (raised by the victim) instead of weftCommDump
//
// Every rank prints "RESULT rank=R rc=N : message" for call #6 (the victim in
// dump mode also "DUMP rank=R : line").
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "weft/weft.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s skip|sleep|other|stop|dump|usr1 VICTIM\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const int victim = std::atoi(argv[2]);
  signal(SIGTERM, SIG_IGN);  // report before weft-run's SIGTERM could end us
  weftComm_t comm;
  if (weftCommInitFromEnv(&comm, nullptr) != weftSuccess) {
    std::printf("RESULT rank=-1 rc=1 : init: %s\n", weftGetLastError(nullptr));
    return 1;
  }
  int rank;
  weftCommUserRank(comm, &rank);
  const char* timeout_env = std::getenv("WEFT_TIMEOUT_MS");
  const int timeout_ms = timeout_env != nullptr ? std::atoi(timeout_env) : 300000;
  std::vector<float> buf(1000, 1.0f), all(4000 * 8, 0.0f);
  for (int i = 1; i <= 5; ++i)
    if (weftAllReduce(buf.data(), buf.data(), buf.size(), weftFloat32, weftSum, comm, nullptr) != weftSuccess) {
      std::printf("RESULT rank=%d rc=1 : warm-up #%d: %s\n", rank, i, weftGetLastError(comm));
      return 1;
    }
  weftResult_t rc = weftSuccess;
  if (rank == victim && mode == "skip") {
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * timeout_ms));
    std::printf("RESULT rank=%d rc=0 : skipped\n", rank);
    std::fflush(stdout);
    weftCommAbort(comm);
    return 0;
  }
  if (rank == victim && mode == "stop") {
    std::fflush(stdout);
    raise(SIGSTOP);
  }
  if (rank == victim && mode == "sleep") std::this_thread::sleep_for(std::chrono::milliseconds(3 * timeout_ms));
  if (rank == victim && mode == "dump") {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms / 3));
    char line[1024];
    weftResult_t drc = weftCommDump(comm, line, sizeof line);
    std::printf("DUMP rank=%d rc=%d : %s\n", rank, static_cast<int>(drc), line);
  }
  if (rank == victim && mode == "usr1") {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms / 3));
    raise(SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms / 3));
  }
  if (rank == victim && mode == "other")
    rc = weftAllGather(buf.data(), all.data(), buf.size(), weftFloat32, comm, nullptr);
  else
    rc = weftAllReduce(buf.data(), buf.data(), buf.size(), weftFloat32, weftSum, comm, nullptr);
  std::printf("RESULT rank=%d rc=%d : %s\n", rank, static_cast<int>(rc), rc == weftSuccess ? "ok" : weftGetLastError(comm));
  std::fflush(stdout);
  if (rc != weftSuccess) {
    weftCommAbort(comm);
    return 1;
  }
  weftCommDestroy(comm);
  return 0;
}
