// The job of one fault-campaign trial (campaign.py), run under weft-run: every
// rank runs the same seeded sequence of collectives and checks every result
// against values computed here, until an error or the time limit. Once
// initialised it writes its pid to PIDDIR/RANK, so the driver can strike it.
//
//   weft-fault-worker SEED PIDDIR [SECONDS]
//
// On the first error it prints one line and exits 1:
//   FAULT rank=R at_ms=<epoch ms> : <weftGetLastError>
// A wrong result prints "WRONG rank=R ..." and exits 3; no error until the time
// limit prints "NOFAULT rank=R" and exits 4.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace {

int64_t epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Small integers stay exact in float sums at any of these sizes.
float contribution(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1)); }

[[noreturn]] void wrong(int rank, const char* what, size_t i, float got, float want) {
  std::printf("WRONG rank=%d %s element %zu: %g, expected %g\n", rank, what, i, static_cast<double>(got),
              static_cast<double>(want));
  std::fflush(stdout);
  std::_Exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s SEED PIDDIR [SECONDS]\n", argv[0]);
    return 2;
  }
  const unsigned seed = static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10));
  const std::string piddir = argv[2];
  const double limit_s = argc == 4 ? std::atof(argv[3]) : 120.0;
  // weft-run sends SIGTERM to the survivors once a rank fails; ignoring it
  // leaves them its grace period to report what they saw themselves.
  signal(SIGTERM, SIG_IGN);
  weftComm_t comm;
  if (weftCommInitFromEnv(&comm, nullptr) != weftSuccess) {
    std::printf("FAULT rank=-1 at_ms=%lld : init: %s\n", static_cast<long long>(epoch_ms()), weftGetLastError(nullptr));
    return 1;
  }
  int rank, n;
  weftCommUserRank(comm, &rank);
  weftCommCount(comm, &n);
  {
    std::ofstream(piddir + "/" + std::to_string(rank)) << getpid() << "\n";
  }
  std::mt19937 rng(seed);  // the same sequence on every rank
  const size_t sizes[] = {1, 7, 1000, 4099, 65536, 262147, 1u << 20};
  std::vector<float> send, recv;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t call = 0;; ++call) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit_s) {
      std::printf("NOFAULT rank=%d after %llu calls\n", rank, static_cast<unsigned long long>(call));
      return 4;
    }
    const size_t count = sizes[rng() % (sizeof sizes / sizeof sizes[0])];
    const int kind = static_cast<int>(rng() % 4);
    const int root = static_cast<int>(rng() % static_cast<unsigned>(n));
    weftResult_t rc = weftSuccess;
    send.assign(count * static_cast<size_t>(n), 0.0f);
    recv.assign(count * static_cast<size_t>(n), -1.0f);
    for (size_t i = 0; i < send.size(); ++i) send[i] = contribution(rank, i);
    switch (kind) {
      case 0: rc = weftAllReduce(send.data(), recv.data(), count, weftFloat32, weftSum, comm, nullptr); break;
      case 1: rc = weftBroadcast(send.data(), recv.data(), count, weftFloat32, root, comm, nullptr); break;
      case 2: rc = weftAllGather(send.data(), recv.data(), count, weftFloat32, comm, nullptr); break;
      default: rc = weftReduceScatter(send.data(), recv.data(), count, weftFloat32, weftSum, comm, nullptr); break;
    }
    if (rc != weftSuccess) {
      std::printf("FAULT rank=%d at_ms=%lld : %s\n", rank, static_cast<long long>(epoch_ms()), weftGetLastError(comm));
      std::fflush(stdout);
      weftCommAbort(comm);
      return 1;
    }
    const float tri = static_cast<float>(n * (n + 1) / 2);
    for (size_t i = 0; i < count; ++i) {
      switch (kind) {
        case 0: {
          float want = tri * static_cast<float>(i % 7 + 1);
          if (recv[i] != want) wrong(rank, "allreduce", i, recv[i], want);
          break;
        }
        case 1:
          if (recv[i] != contribution(root, i)) wrong(rank, "broadcast", i, recv[i], contribution(root, i));
          break;
        case 2:
          for (int r = 0; r < n; ++r) {
            size_t j = static_cast<size_t>(r) * count + i;
            if (recv[j] != contribution(r, i)) wrong(rank, "allgather", j, recv[j], contribution(r, i));
          }
          break;
        default: {
          size_t j = static_cast<size_t>(rank) * count + i;  // this rank's block of the sum
          float want = tri * static_cast<float>(j % 7 + 1);
          if (recv[i] != want) wrong(rank, "reducescatter", i, recv[i], want);
        }
      }
    }
  }
}
