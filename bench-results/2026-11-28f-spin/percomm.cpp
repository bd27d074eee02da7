// Lab probe (2026-11-28f-spin.md), not part of the build: K communicators forcing
// ALGO, ROUNDS interleaved rounds of 50 all-reduces of COUNT floats on the first M
// of them; rank 0 prints each one's 10th/50th/90th percentile us per call (the
// slowest rank's).
//   g++ -O2 -std=c++17 -Iinclude percomm.cpp -Lbuild -lweft -Wl,-rpath,$PWD/build -o /tmp/percomm
//   tests/netns/netns_test.sh run 4 2 /tmp/percomm --shape 2gbit -- K ALGO ROUNDS [COUNT [M]]
#include <weft/weft.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <string>
using Clock = std::chrono::steady_clock;
int main(int argc, char** argv) {
  int K = atoi(argv[1]); const char* algo = argv[2]; int rounds = atoi(argv[3]); size_t count = argc > 4 ? atoi(argv[4]) : 1024; int M = argc > 5 ? atoi(argv[5]) : K;
  weftComm_t world; 
  if (weftCommInitFromEnv(&world, nullptr) != weftSuccess) { fprintf(stderr, "init\n"); return 1; }
  int rank, n; weftCommUserRank(world, &rank); weftCommCount(world, &n);
  std::vector<weftComm_t> comms(K);
  std::string a = std::string("allreduce:") + algo;
  for (int k = 0; k < K; ++k) {
    weftUniqueId id{}; if (rank == 0) weftGetUniqueId(&id);
    weftBroadcast(&id, &id, sizeof id, weftUint8, 0, world, nullptr);
    weftConfig_t cfg = WEFT_CONFIG_INITIALIZER; cfg.algo = a.c_str();
    if (weftCommInitRankConfig(&comms[k], n, id, rank, &cfg) != weftSuccess) return 2;
  }
  std::vector<float> buf(count, 1.0f);
  std::vector<std::vector<double>> t(K);
  for (int k = 0; k < K; ++k) for (int i = 0; i < 20; ++i) weftAllReduce(buf.data(), buf.data(), count, weftFloat32, weftSum, comms[k], nullptr);
  for (int r = 0; r < rounds; ++r) for (int k = 0; k < M; ++k) {
    int tok = 0; weftAllReduce(&tok, &tok, 1, weftInt32, weftSum, world, nullptr);
    auto t0 = Clock::now(); int calls = 50;
    for (int i = 0; i < calls; ++i) weftAllReduce(buf.data(), buf.data(), count, weftFloat32, weftSum, comms[k], nullptr);
    double s = std::chrono::duration<double>(Clock::now() - t0).count() / calls;
    weftAllReduce(&s, &s, 1, weftFloat64, weftMax, world, nullptr);
    t[k].push_back(s * 1e6);
  }
  if (rank == 0) for (int k = 0; k < M; ++k) { auto v = t[k]; std::sort(v.begin(), v.end());
    printf("comm %d %s: q10 %.0f q50 %.0f q90 %.0f\n", k, algo, v[v.size()/10], v[v.size()/2], v[v.size()*9/10]); }
  for (auto c : comms) weftCommDestroy(c);
  weftCommDestroy(world);
}
