// Failure test, run under weft-run: every rank loops over large all-reduces and
// the victim rank SIGKILLs itself in the middle of one. Every survivor must get
// an error naming the victim within the deadline. Exit codes: 0 = the error
// named the victim; 1 = it did not or no error came; the victim never exits.
// With "split" the all-reduces run on a communicator split from the world (its
// channels and bootstrap connection are the world's).
//
//   weft-kill-rank VICTIM_RANK [split]
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
  if (argc != 2 && !(argc == 3 && std::strcmp(argv[2], "split") == 0)) {
    std::fprintf(stderr, "usage: %s VICTIM_RANK [split]\n", argv[0]);
    return 2;
  }
  int victim = std::atoi(argv[1]);
  // weft-run terminates the other ranks when one dies; ignoring SIGTERM leaves
  // the survivors its grace period to report what they saw.
  signal(SIGTERM, SIG_IGN);
  weftComm_t comm;
  if (weftCommInitFromEnv(&comm, nullptr) != weftSuccess) {
    std::fprintf(stderr, "init failed: %s\n", weftGetLastError(nullptr));
    return 1;
  }
  int rank;
  weftCommUserRank(comm, &rank);
  if (argc == 3) {
    weftComm_t child = nullptr;  // the same ranks in the same order
    if (weftCommSplit(comm, 0, rank, &child, nullptr) != weftSuccess) {
      std::fprintf(stderr, "split failed: %s\n", weftGetLastError(comm));
      return 1;
    }
    comm = child;
  }
  const size_t count = 16u << 20;  // 64 MiB of float
  std::vector<float> buf(count, 1.0f);
  if (rank == victim) {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      raise(SIGKILL);
    }).detach();
  }
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100000; ++i) {
    weftResult_t rc = weftAllReduce(buf.data(), buf.data(), count, weftFloat32, weftSum, comm, nullptr);
    if (rc != weftSuccess) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::string msg = weftGetLastError(comm);
      std::string needle = "rank " + std::to_string(victim);
      bool named = msg.find(needle) != std::string::npos;
      std::printf("rank %d: error after %.2f s (%s): %s\n", rank, s,
                  named ? "names the dead peer" : "DOES NOT name the dead peer", msg.c_str());
      std::fflush(stdout);
      weftCommAbort(comm);
      return named ? 0 : 1;
    }
  }
  std::printf("rank %d: no error although rank %d was killed\n", rank, victim);
  return 1;
}
