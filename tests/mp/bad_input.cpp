// Bad input and mismatched calls, run under weft-run -n 2. Each check expects a
// documented result code and a non-empty weftGetLastError message; nothing may
// hang (weft-run's --timeout bounds the run).
//
//   weft-bad-input args            invalid arguments on a healthy communicator
//   weft-bad-input nranks          ranks disagree on nranks at init
//   weft-bad-input count           ranks disagree on count (run with and without WEFT_CHECK=1)
//   weft-bad-input config          weftConfig_t: a bad algorithm choice, a good one, an
//                                  older header's shorter struct, a corrupt one
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace {
int failures = 0;

void expect(const char* what, weftResult_t got, weftResult_t want, weftComm_t comm,
            const char* must_contain = nullptr) {
  std::string msg = weftGetLastError(comm);
  bool ok = got == want && !msg.empty() &&
            (must_contain == nullptr || msg.find(must_contain) != std::string::npos);
  std::printf("%s: %s: got %d (%s), want %d; message: %s\n", ok ? "PASS" : "FAIL", what, got,
              weftGetErrorString(got), want, msg.c_str());
  if (!ok) ++failures;
}

int rank_from_env() {
  const char* r = std::getenv("WEFT_RANK");
  return r ? std::atoi(r) : 0;
}
}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "nranks") {
    if (rank_from_env() == 1) setenv("WEFT_NRANKS", "3", 1);
    weftComm_t comm;
    weftResult_t rc = weftCommInitFromEnv(&comm, nullptr);
    bool ok = rc != weftSuccess && std::strlen(weftGetLastError(nullptr)) > 0;
    std::printf("%s: mismatched nranks at init: got %d; message: %s\n", ok ? "PASS" : "FAIL", rc,
                weftGetLastError(nullptr));
    return ok ? 0 : 1;
  }

  weftComm_t comm;
  if (weftCommInitFromEnv(&comm, nullptr) != weftSuccess) {
    std::printf("FAIL: init: %s\n", weftGetLastError(nullptr));
    return 1;
  }
  int rank;
  weftCommUserRank(comm, &rank);
  std::vector<float> buf(1024, 1.0f);

  if (mode == "count") {
    size_t count = 100 + static_cast<size_t>(rank);
    weftResult_t rc = weftAllReduce(buf.data(), buf.data(), count, weftFloat32, weftSum, comm, nullptr);
    bool ok = rc == weftInvalidUsage || rc == weftRemoteError;
    std::printf("%s: rank %d: mismatched count: got %d (%s); message: %s\n", ok ? "PASS" : "FAIL",
                rank, rc, weftGetErrorString(rc), weftGetLastError(comm));
    weftCommAbort(comm);
    return ok ? 0 : 1;
  }

  if (mode == "config") {
    // Each further communicator's id comes from rank 0 over the first one.
    auto open = [&](weftConfig_t* config, weftComm_t* out) {
      weftUniqueId id{};
      if (rank == 0 && weftGetUniqueId(&id) != weftSuccess) return weftInternalError;
      weftResult_t rc = weftBroadcast(&id, &id, sizeof(id), weftUint8, 0, comm, nullptr);
      return rc != weftSuccess ? rc : weftCommInitRankConfig(out, 2, id, rank, config);
    };
    weftComm_t forced = nullptr;
    weftConfig_t config = WEFT_CONFIG_INITIALIZER;
    config.algo = "allreduce:nosuch";
    expect("config.algo names no algorithm", open(&config, &forced), weftInvalidArgument, nullptr,
           "weftConfig_t.algo=allreduce:nosuch");
    config.algo = "allreduce:ring";
    weftResult_t rc = open(&config, &forced);
    std::printf("%s: config.algo ring: got %d (%s)\n", rc == weftSuccess ? "PASS" : "FAIL", rc,
                rc == weftSuccess ? "" : weftGetLastError(nullptr));
    failures += rc == weftSuccess ? 0 : 1;
    if (rc == weftSuccess) {
      rc = weftAllReduce(buf.data(), buf.data(), 1024, weftFloat32, weftSum, forced, nullptr);
      bool good = rc == weftSuccess && buf[0] == 2.0f && buf[1023] == 2.0f;
      std::printf("%s: allreduce on the ring-only communicator\n", good ? "PASS" : "FAIL");
      failures += good ? 0 : 1;
      weftCommDestroy(forced);
    }
    // A program built against a weft.h without the algo field passes a shorter size.
    weftConfig_t older = WEFT_CONFIG_INITIALIZER;
    older.size = offsetof(weftConfig_t, algo);
    older.algo = "allreduce:nosuch";  // past the struct it claims: never read
    rc = open(&older, &forced);
    std::printf("%s: older weftConfig_t size: got %d (%s)\n", rc == weftSuccess ? "PASS" : "FAIL", rc,
                rc == weftSuccess ? "" : weftGetLastError(nullptr));
    failures += rc == weftSuccess ? 0 : 1;
    if (rc == weftSuccess) weftCommDestroy(forced);
    weftConfig_t corrupt = WEFT_CONFIG_INITIALIZER;
    corrupt.size = 7;
    expect("corrupt weftConfig_t size", open(&corrupt, &forced), weftInvalidArgument, nullptr,
           "WEFT_CONFIG_INITIALIZER");
    weftCommDestroy(comm);
    return failures == 0 ? 0 : 1;
  }

  expect("NULL sendbuff", weftAllReduce(nullptr, buf.data(), 4, weftFloat32, weftSum, comm, nullptr),
         weftInvalidArgument, comm, "NULL");
  expect("invalid datatype",
         weftAllReduce(buf.data(), buf.data(), 4, static_cast<weftDataType_t>(42), weftSum, comm, nullptr),
         weftInvalidArgument, comm, "datatype");
  expect("invalid op",
         weftAllReduce(buf.data(), buf.data(), 4, weftFloat32, static_cast<weftRedOp_t>(17), comm, nullptr),
         weftInvalidArgument, comm, "op");
  expect("count overflow",
         weftAllReduce(buf.data(), buf.data(), SIZE_MAX / 2, weftFloat32, weftSum, comm, nullptr),
         weftInvalidArgument, comm, "overflow");
  expect("bitwise op on float",
         weftAllReduce(buf.data(), buf.data(), 4, weftFloat32, weftBxor, comm, nullptr),
         weftInvalidArgument, comm, "bitwise op bxor needs an integer datatype");
  expect("bitwise op on bf16 (reduce)",
         weftReduce(buf.data(), buf.data(), 4, weftBfloat16, weftBand, 0, comm, nullptr),
         weftInvalidArgument, comm, "needs an integer datatype");
  expect("gather root out of range",
         weftGather(buf.data(), buf.data(), 4, weftFloat32, 2, comm, nullptr), weftInvalidArgument, comm,
         "weftGather: root 2 is out of range");
  expect("scatter NULL recvbuff",
         weftScatter(buf.data(), nullptr, 4, weftFloat32, 0, comm, nullptr), weftInvalidArgument, comm,
         "weftScatter: recvbuff is NULL");
  expect("gather count overflow",
         weftGather(buf.data(), buf.data(), SIZE_MAX / 4, weftFloat32, 0, comm, nullptr), weftInvalidArgument, comm,
         "overflow");
  {
    size_t counts[2] = {1, 1}, displs[2] = {0, 1};
    expect("alltoallv NULL counts",
           weftAlltoAllv(buf.data(), nullptr, displs, buf.data() + 8, counts, displs, weftFloat32, comm, nullptr),
           weftInvalidArgument, comm, "weftAlltoAllv: sendcounts");
    size_t twos[2] = {2, 2}, spread[2] = {0, 2};  // this rank's part to itself: 1 sent, 2 received
    expect("alltoallv own part mismatch",
           weftAlltoAllv(buf.data(), counts, displs, buf.data() + 8, twos, spread, weftFloat32, comm, nullptr),
           weftInvalidArgument, comm, "part to itself");
    expect("alltoallv overlapping buffers",
           weftAlltoAllv(buf.data(), counts, displs, buf.data() + 1, counts, displs, weftFloat32, comm, nullptr),
           weftInvalidArgument, comm, "overlap");
    weftRequest_t req = nullptr;
    expect("alltoallv async NULL recvbuff",
           weftAlltoAllvAsync(buf.data(), counts, displs, nullptr, counts, displs, weftFloat32, comm, &req),
           weftInvalidArgument, comm, "weftAlltoAllvAsync: recvbuff is NULL");
  }
  weftUniqueId id;
  weftComm_t other = nullptr;
  if (weftGetUniqueId(&id) == weftSuccess)
    expect("rank >= nranks", weftCommInitRank(&other, 2, id, 5), weftInvalidArgument, nullptr, "rank 5");
  else
    expect("weftGetUniqueId", weftInternalError, weftSuccess, nullptr);
  expect("NULL count pointer", weftCommCount(comm, nullptr), weftInvalidArgument, comm);
  // The communicator still works after rejected calls.
  weftResult_t rc = weftAllReduce(buf.data(), buf.data(), 1024, weftFloat32, weftSum, comm, nullptr);
  bool good = rc == weftSuccess && buf[0] == 2.0f && buf[1023] == 2.0f;
  std::printf("%s: allreduce after rejected calls\n", good ? "PASS" : "FAIL");
  failures += good ? 0 : 1;
  weftCommDestroy(comm);
  expect("use after destroy",
         weftAllReduce(buf.data(), buf.data(), 4, weftFloat32, weftSum, comm, nullptr),
         weftInvalidArgument, nullptr, "destroyed");
  expect("destroy twice", weftCommDestroy(comm), weftInvalidArgument, nullptr, "destroyed");
  return failures == 0 ? 0 : 1;
}
