// weftGroupSimulateEnd against estimates worked out by hand. Run at 2 ranks on one
// host with WEFT_ALGO=allreduce:ring, WEFT_TUNE_ONLINE=0 and WEFT_TUNING_FILE=
// simulate_tuning.txt (alpha 1e-5 s, beta 1e-9 s/B, gamma 2e-9 s/B):
//   - all-reduce of 4096 floats (N = 16 KiB, one slice round): the ring's
//     2(n-1) alpha + 2(n-1)/n N beta + (n-1)/n N gamma
//     = 2e-5 + 16384e-9 + 8192 x 2e-9 = 52.768 us;
//   - a send and a receive of 16 KiB with the other rank: alpha + 32768 beta = 42.768 us;
//   - both in one group: 95.536 us; two all-reduces: 105.536 us.
// Nothing runs: the output keeps its poison, and a real all-reduce afterwards (which
// would pair with a simulated one if it had run anywhere) sums right. Misuse: no
// group, a NULL result, inner groups still open.
//
// --device DRIVER p2p|staged: the same on device memory through DRIVER (the
// stand-in: both ranks on its one GPU), after the refusal before the first device
// collective. p2p (cuda_p2p, link class gpu: alpha 2e-5, beta 1e-10, gamma 3e-10;
// 32 MiB buffers, so one round; the gpu class counts beta and gamma once per rank
// doing the same at once), N = 16 KiB:
//   - all-gather of 4096 floats a rank: alpha + (n-1) N beta x n = 23.2768 us;
//   - reduce-scatter to 4096 floats: alpha + (n-1) N (beta + gamma) x n = 33.1072 us;
//   - broadcast: alpha + N beta x (n-1) readers = 21.6384 us;
//   - all-reduce: one-shot, alpha + (n-1) N (beta + gamma) x n = 33.1072 us (two-shot:
//     2 alpha + 2 (n-1)/n N beta x n + (n-1)/n N gamma x n = 53.1072 us);
//   - send/recv of 16 KiB: alpha + 32768 beta = 23.2768 us.
// staged (WEFT_P2P_DISABLE=1 WEFT_SHM_DISABLE=1; stg alpha 1e-5, beta 2e-11): the
// host estimate plus 2 alpha + (bytes in + bytes out) beta through pinned memory:
//   - all-reduce: 52.768 + 20 + 32768 x 2e-5 = 73.42336 us;
//   - send/recv: 42.768 + 20 + 32768 x 2e-5 = 63.42336 us.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/device_memory.h"
#include "weft/weft.h"

namespace {

int g_rank = 0;
int g_failures = 0;

void fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL %s\n", g_rank, what.c_str());
  ++g_failures;
}

// Ends the open group by simulation and checks the estimate.
void expect_seconds(const char* what, double want) {
  double got = -1;
  const weftResult_t rc = weftGroupSimulateEnd(&got);
  if (rc != weftSuccess) return fail(std::string(what) + ": " + weftGetLastError(nullptr));
  if (std::fabs(got - want) > 1e-9 * want)
    fail(std::string(what) + ": estimate " + std::to_string(got * 1e6) + " us, want " + std::to_string(want * 1e6));
}

// The --device checks (the header's list).
void check_device(weftComm_t comm, weft_tools::DeviceMemory& d, bool p2p) {
  const size_t count = 4096, bytes = count * sizeof(float);
  auto* a = static_cast<float*>(d.alloc(2 * bytes));
  auto* b = static_cast<float*>(d.alloc(2 * bytes));
  if (a == nullptr || b == nullptr) return fail("device buffers");
  void* s = d.stream();
  const int peer = 1 - g_rank;
  double got = -1;
  weftGroupStart();
  weftAllReduce(a, b, count, weftFloat32, weftSum, comm, s);
  if (weftGroupSimulateEnd(&got) != weftInvalidUsage ||
      std::strstr(weftGetLastError(nullptr), "first device collective") == nullptr)
    fail(std::string("a device all-reduce before the first device collective: ") + weftGetLastError(nullptr));
  if (weftAllReduce(a, b, count, weftFloat32, weftSum, comm, s) != weftSuccess || !d.synchronize())
    return fail(std::string("the first device all-reduce: ") + weftGetLastError(comm));
  const double alpha = 2e-5, beta = 1e-10, gamma = 3e-10, N = static_cast<double>(bytes);
  const double allreduce = p2p ? alpha + 2 * N * (beta + gamma) : 52.768e-6 + 2e-5 + 2 * N * 2e-11;
  const double sendrecv = p2p ? alpha + 2 * N * beta : 42.768e-6 + 2e-5 + 2 * N * 2e-11;
  weftGroupStart();
  weftAllReduce(a, b, count, weftFloat32, weftSum, comm, s);
  expect_seconds("device all-reduce", allreduce);
  weftGroupStart();
  weftSend(a, count, weftFloat32, peer, comm, s);
  weftRecv(b, count, weftFloat32, peer, comm, s);
  expect_seconds("device send/recv", sendrecv);
  if (p2p) {
    weftGroupStart();
    weftAllGather(a, b, count, weftFloat32, comm, s);
    weftReduceScatter(a, b, count, weftFloat32, weftSum, comm, s);
    weftBroadcast(a, a, count, weftFloat32, 0, comm, s);
    weftAllReduce(a, b, count, weftFloat32, weftSum, comm, s);
    expect_seconds("device all-gather + reduce-scatter + broadcast + all-reduce",
                   (alpha + 2 * N * beta) + (alpha + 2 * N * (beta + gamma)) + (alpha + N * beta) + allreduce);
  }
  d.release(a);
  d.release(b);
}

}  // namespace

int main(int argc, char** argv) {
  std::string driver, path;
  if (argc == 4 && std::string(argv[1]) == "--device") {
    driver = argv[2];
    path = argv[3];
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: %s [--device DRIVER p2p|staged]\n", argv[0]);
    return 2;
  }
  // Loaded before the first weft call, which then finds it.
  weft_tools::DeviceMemory device;
  const char* r = std::getenv("WEFT_RANK");
  if (!driver.empty() && !device.open(driver, r != nullptr ? std::atoi(r) : 0)) return 1;
  weftComm_t comm = nullptr;
  if (weftCommInitFromEnv(&comm, nullptr) != weftSuccess) {
    std::fprintf(stderr, "init failed: %s\n", weftGetLastError(nullptr));
    return 1;
  }
  int n = 0;
  weftCommUserRank(comm, &g_rank);
  weftCommCount(comm, &n);
  if (n != 2) {
    std::fprintf(stderr, "run at 2 ranks (the estimates are worked out for 2)\n");
    return 1;
  }
  const size_t count = 4096;
  const double allreduce = 2e-5 + 16384e-9 + 8192 * 2e-9, sendrecv = 1e-5 + 32768e-9;
  std::vector<float> in(count, 1.0f + static_cast<float>(g_rank)), out(count, -7.0f), back(count, -7.0f);
  const int peer = 1 - g_rank;
  double s = -1;

  weftGroupStart();
  weftAllReduce(in.data(), out.data(), count, weftFloat32, weftSum, comm, nullptr);
  expect_seconds("all-reduce", allreduce);

  weftGroupStart();
  weftSend(in.data(), count, weftFloat32, peer, comm, nullptr);
  weftRecv(back.data(), count, weftFloat32, peer, comm, nullptr);
  expect_seconds("send/recv", sendrecv);

  weftGroupStart();
  weftRecv(back.data(), count, weftFloat32, peer, comm, nullptr);
  weftAllReduce(in.data(), out.data(), count, weftFloat32, weftSum, comm, nullptr);
  weftSend(in.data(), count, weftFloat32, peer, comm, nullptr);
  expect_seconds("send/recv + all-reduce", sendrecv + allreduce);

  weftGroupStart();
  weftAllReduce(in.data(), out.data(), count, weftFloat32, weftSum, comm, nullptr);
  weftAllReduce(out.data(), out.data(), count, weftFloat32, weftSum, comm, nullptr);
  expect_seconds("two all-reduces", 2 * allreduce);

  for (size_t i = 0; i < count; ++i)
    if (out[i] != -7.0f || back[i] != -7.0f) {
      fail("a simulated call wrote its output (element " + std::to_string(i) + ")");
      break;
    }
  if (weftAllReduce(in.data(), out.data(), count, weftFloat32, weftSum, comm, nullptr) != weftSuccess)
    fail(std::string("all-reduce after the simulations: ") + weftGetLastError(comm));
  else if (out[0] != 3.0f || out[count - 1] != 3.0f)
    fail("all-reduce after the simulations: " + std::to_string(out[0]) + ", want 3");

  if (weftGroupSimulateEnd(&s) != weftInvalidUsage) fail("no group open: not weftInvalidUsage");
  weftGroupStart();
  if (weftGroupSimulateEnd(nullptr) != weftInvalidArgument) fail("NULL seconds: not weftInvalidArgument");
  weftGroupStart();
  if (weftGroupSimulateEnd(&s) != weftInvalidUsage ||
      std::strstr(weftGetLastError(nullptr), "outermost") == nullptr)
    fail("inner group open: not refused naming the outermost group");
  weftGroupEnd();
  weftGroupEnd();  // both were left open by the refusals; nothing recorded, nothing runs

  if (!driver.empty()) check_device(comm, device, path == "p2p");
  weftCommDestroy(comm);
  std::printf("rank %d: group estimates %s\n", g_rank, g_failures == 0 ? "as worked out" : "WRONG");
  return g_failures == 0 ? 0 : 1;
}
