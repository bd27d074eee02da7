// Fault-test rank for the multi-host tests: all-reduces 4 MiB of float in a
// loop until a call fails, prints "rank R: failed: <weftGetLastError>", and
// exits 1. It lingers a few seconds before exiting: a survivor that exits at
// once closes its own connections, and a slower survivor could then report
// that closure instead of the fault under test; the test judges each rank's
// first error, so the survivors must outlive everyone's first error.
//
//   weft-netns-fault-rank [COUNT]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "weft/weft.h"

int main(int argc, char** argv) {
  size_t count = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : (1u << 20);
  weftComm_t comm;
  if (weftCommInitFromEnv(&comm, nullptr) != weftSuccess) {
    std::fprintf(stderr, "init failed: %s\n", weftGetLastError(nullptr));
    return 1;
  }
  int rank = -1;
  weftCommUserRank(comm, &rank);
  std::vector<float> buf(count, 1.0f);
  for (long i = 0; i < 100000000; ++i) {
    if (weftAllReduce(buf.data(), buf.data(), count, weftFloat32, weftSum, comm, nullptr) !=
        weftSuccess) {
      std::printf("rank %d: call %ld failed: %s\n", rank, i, weftGetLastError(comm));
      std::fflush(stdout);
      sleep(3);
      weftCommAbort(comm);
      return 1;
    }
    if (i == 0) {
      std::printf("rank %d: running\n", rank);
      std::fflush(stdout);
    }
  }
  std::printf("rank %d: no error\n", rank);
  return 0;
}
