// How much of a large all-reduce hides behind compute on the caller's thread:
// the all-reduce is posted (weftAllReduceAsync) and progresses on the engine
// while this thread multiplies matrices, then waits. Prints, slowest rank:
//   alone: all-reduce A ms, compute C ms; together T ms (compute part C' ms)
//   exposed = T - C' (the wait after the compute), hidden = 1 - exposed / A,
//   compute slowdown = C' / C - 1.
// (hidden does not use C, which moves with other load on a shared machine.)
// The compute loop is sized to take about as long as the all-reduce alone.
// --compute sleep stands in for work that leaves the core free (a GPU kernel).
//   weft-run -n 2 weft-bench-overlap [--mib 64] [--reps 5] [--dim 256] [--compute gemm|sleep]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "weft/weft.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

void check(weftResult_t rc, weftComm_t comm, const char* what) {
  if (rc == weftSuccess) return;
  std::fprintf(stderr, "overlap: %s: %s: %s\n", what, weftGetErrorString(rc), weftGetLastError(comm));
  std::exit(1);
}

// C += A * B, n x n floats, i-k-j order (vectorizes; stays in cache at n = 256).
struct Gemm {
  explicit Gemm(int n) : n(n), a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size(), 0.0f) {}
  void run(int times) {
    if (sleep) {
      std::this_thread::sleep_for(std::chrono::microseconds(2000 * times));
      return;
    }
    for (int t = 0; t < times; ++t)
      for (int i = 0; i < n; ++i)
        for (int k = 0; k < n; ++k) {
          const float aik = a[static_cast<size_t>(i) * n + k];
          float* ci = &c[static_cast<size_t>(i) * n];
          const float* bk = &b[static_cast<size_t>(k) * n];
          for (int j = 0; j < n; ++j) ci[j] += aik * bk[j];
        }
  }
  int n;
  bool sleep = false;  // 2 ms per pass, no CPU
  std::vector<float> a, b, c;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 64;
  int reps = 5, dim = 256;
  std::string compute_kind = "gemm";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string f = argv[i];
    if (f == "--mib") mib = std::strtoul(argv[i + 1], nullptr, 10);
    else if (f == "--reps") reps = std::atoi(argv[i + 1]);
    else if (f == "--dim") dim = std::atoi(argv[i + 1]);
    else if (f == "--compute") compute_kind = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--mib 64] [--reps 5] [--dim 256] [--compute gemm|sleep]\n", argv[0]);
      return 2;
    }
  }
  weftComm_t comm = nullptr;
  check(weftCommInitFromEnv(&comm, nullptr), nullptr, "init");
  int rank = 0, n = 0;
  weftCommUserRank(comm, &rank);
  weftCommCount(comm, &n);
  const size_t count = (mib << 20) / sizeof(float);
  std::vector<float> buf(count, 1.0f);

  // Settle online tuning first, so every timed call runs the same algorithm.
  int settled = 0;
  for (int i = 0; i < 200 && !settled; ++i) {
    const char* algo = nullptr;
    check(weftAllReduce(buf.data(), buf.data(), count, weftFloat32, weftSum, comm, nullptr), comm, "warm-up");
    check(weftCommGetAlgorithm(comm, "allreduce", count, weftFloat32, 0, &algo, &settled), comm, "query");
  }
  std::vector<double> alone;
  for (int r = 0; r < reps; ++r) {
    check(weftBarrier(comm), comm, "barrier");
    auto t0 = Clock::now();
    check(weftAllReduce(buf.data(), buf.data(), count, weftFloat32, weftSum, comm, nullptr), comm, "all-reduce");
    alone.push_back(ms_since(t0));
  }
  // Compute sized to the all-reduce: time one pass, scale.
  Gemm gemm(dim);
  gemm.sleep = compute_kind == "sleep";
  auto t0 = Clock::now();
  gemm.run(1);
  double per_pass = ms_since(t0);
  double a_ms = median(alone);
  int passes = std::max(1, static_cast<int>(std::ceil(a_ms / per_pass)));
  std::vector<double> compute, together, compute_during, exposed;
  for (int r = 0; r < reps; ++r) {
    check(weftBarrier(comm), comm, "barrier");
    t0 = Clock::now();
    gemm.run(passes);
    compute.push_back(ms_since(t0));
    check(weftBarrier(comm), comm, "barrier");
    t0 = Clock::now();
    weftRequest_t req = nullptr;
    check(weftAllReduceAsync(buf.data(), buf.data(), count, weftFloat32, weftSum, comm, &req), comm, "post");
    gemm.run(passes);
    compute_during.push_back(ms_since(t0));
    check(weftWait(&req), comm, "wait");
    together.push_back(ms_since(t0));
    exposed.push_back(together.back() - compute_during.back());
  }
  // The slowest rank's medians.
  double m[5] = {a_ms, median(compute), median(together), median(compute_during), median(exposed)};
  check(weftAllReduce(m, m, 5, weftFloat64, weftMax, comm, nullptr), comm, "gather");
  if (rank == 0) {
    double hidden = std::clamp(1 - m[4] / m[0], 0.0, 1.0);
    std::printf("overlap: %d ranks, %zu MiB all-reduce (%s engine threads), %s x %d, median of %d, slowest rank\n",
                n, mib, std::getenv("WEFT_PROGRESS_THREADS") ? std::getenv("WEFT_PROGRESS_THREADS") : "1",
                gemm.sleep ? "2 ms sleep" : (std::to_string(dim) + "x" + std::to_string(dim) + " GEMM").c_str(),
                passes, reps);
    std::printf("  all-reduce alone %.2f ms, compute alone %.2f ms, together %.2f ms (compute part %.2f ms, "
                "then %.2f ms waiting)\n", m[0], m[1], m[2], m[3], m[4]);
    std::printf("  hidden %.0f%% of the all-reduce; compute slowed %.0f%%\n", 100 * hidden, 100 * (m[3] / m[1] - 1));
  }
  weftCommDestroy(comm);
  return 0;
}
