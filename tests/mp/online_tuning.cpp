// Online tuning across real processes: for several size classes, all-reduces (in
// place, out of place and non-blocking) run until weftCommGetAlgorithm says the
// class has settled; every result is checked on every rank, every rank must settle
// at the same call on the same algorithm, and another count of a settled class
// runs that algorithm without measuring again.
//
//   weft-online-tuning [--off | --hierarchical]
//     --off: WEFT_TUNE_ONLINE=0 is set; nothing is measured
//     --hierarchical: WEFT_ALGO names hierarchical, so every explanation must list
//       it with its level algorithms (a class may settle without measuring)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace {

int g_rank = 0;
int g_failures = 0;

void fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", g_rank, what.c_str());
  ++g_failures;
}

bool ok(weftResult_t rc, weftComm_t comm, const std::string& what) {
  if (rc == weftSuccess) return true;
  fail(what + " failed: " + weftGetLastError(comm));
  return false;
}

// Input element i of rank r, small integers so every summation order is exact.
float input(size_t i, int r) { return static_cast<float>((i * 7 + static_cast<size_t>(r) * 3) % 101); }

// One all-reduce of `count` floats, checked: call k picks in place, out of place or
// the non-blocking form, so trials see all three.
bool checked_allreduce(weftComm_t comm, size_t count, int n, int k, std::vector<float>& a, std::vector<float>& b) {
  for (size_t i = 0; i < count; ++i) a[i] = input(i, g_rank);
  float* out = k % 3 == 0 ? a.data() : b.data();
  const std::string what = "allreduce of " + std::to_string(count) + " floats, call " + std::to_string(k);
  if (k % 3 == 2) {
    weftRequest_t req = nullptr;
    if (!ok(weftAllReduceAsync(a.data(), out, count, weftFloat32, weftSum, comm, &req), comm, what)) return false;
    if (!ok(weftWait(&req), comm, what + " (wait)")) return false;
  } else if (!ok(weftAllReduce(a.data(), out, count, weftFloat32, weftSum, comm, nullptr), comm, what)) {
    return false;
  }
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += input(i, r);
    if (out[i] != want) {
      fail(what + ": element " + std::to_string(i) + " is " + std::to_string(out[i]) + ", want " +
           std::to_string(want));
      return false;
    }
  }
  return true;
}

// Whether every rank holds the same (name, calls) as this one.
bool same_everywhere(weftComm_t comm, int n, const std::string& name, int calls) {
  struct Row {
    char name[32];
    int32_t calls;
  } mine{};
  std::snprintf(mine.name, sizeof(mine.name), "%s", name.c_str());
  mine.calls = calls;
  std::vector<Row> all(static_cast<size_t>(n));
  if (!ok(weftAllGather(&mine, all.data(), sizeof(Row), weftUint8, comm, nullptr), comm, "allgather of picks"))
    return false;
  for (int r = 0; r < n; ++r)
    if (std::strcmp(all[r].name, mine.name) != 0 || all[r].calls != mine.calls) {
      fail("rank " + std::to_string(r) + " settled on " + all[r].name + " after " + std::to_string(all[r].calls) +
           " calls, this rank on " + name + " after " + std::to_string(calls));
      return false;
    }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const bool off = argc > 1 && std::strcmp(argv[1], "--off") == 0;
  const bool want_hierarchical = argc > 1 && std::strcmp(argv[1], "--hierarchical") == 0;
  weftComm_t comm = nullptr;
  if (weftCommInitFromEnv(&comm, nullptr) != weftSuccess) {
    std::fprintf(stderr, "init failed: %s\n", weftGetLastError(nullptr));
    return 1;
  }
  int n = 1;
  weftCommUserRank(comm, &g_rank);
  weftCommCount(comm, &n);
  const size_t counts[] = {1, 300, 5000, 70001, 1u << 20};
  const size_t max_count = (1u << 20) + (1u << 17);  // the largest count and its neighbour
  std::vector<float> a(max_count), b(max_count);
  for (size_t count : counts) {
    const char* algo = nullptr;
    int settled = 0;
    int calls = 0;
    // A bounded number of calls: 8 candidates x 5 rounds x turns of at most 1 + 1024.
    for (; calls <= 8 * 5 * 1025; ++calls) {
      if (!ok(weftCommGetAlgorithm(comm, "allreduce", count, weftFloat32, 0, &algo, &settled), comm, "query"))
        break;
      if (settled) break;
      if (off) fail("WEFT_TUNE_ONLINE=0 but the class of count " + std::to_string(count) + " is not settled");
      if (off || !checked_allreduce(comm, count, n, calls, a, b)) break;
    }
    if (g_failures > 0) break;
    if (!settled) {
      fail("count " + std::to_string(count) + ": not settled after " + std::to_string(calls) + " calls");
      break;
    }
    // Two candidates far apart in prediction leave one within WEFT_TUNE_RANGE_PCT:
    // with --hierarchical a class may settle at once.
    const bool measures = n > 1 && !off && !want_hierarchical;
    if (measures && calls == 0) fail("count " + std::to_string(count) + ": settled before any call");
    std::printf("rank %d: %zu floats: %s after %d calls\n", g_rank, count, algo, calls);
    // The struct form of the explanation agrees with weftCommGetAlgorithm, its pick
    // is its lowest prediction, on one host its terms add up, and the settled
    // winner carries a measured time.
    weftAlgoExplanation_t ex;
    if (ok(weftCommExplainAlgorithm(comm, "allreduce", count, weftFloat32, 0, &ex), comm, "explain")) {
      if (std::strcmp(ex.algorithm, algo) != 0 || !ex.settled)
        fail(std::string("explanation runs ") + ex.algorithm + ", weftCommGetAlgorithm says " + algo);
      if (ex.ncandidates < 1 || ex.simulated) fail("explanation: no candidates, or simulated on one host");
      const weftAlgoCandidate_t* low = nullptr;
      bool winner_measured = false, saw_hierarchical = false;
      for (int i = 0; i < ex.ncandidates; ++i) {
        const weftAlgoCandidate_t& c = ex.candidates[i];
        const double sum = c.latency + c.bandwidth + c.reduction;
        if (c.predicted >= 0 && std::abs(sum - c.predicted) > 1e-9 * c.predicted + 1e-15)
          fail(std::string(c.algorithm) + ": terms add up to " + std::to_string(sum) + " s, predicted " +
               std::to_string(c.predicted));
        if (c.predicted >= 0 && (low == nullptr || c.predicted < low->predicted)) low = &c;
        winner_measured |= std::strcmp(c.algorithm, algo) == 0 && c.measured > 0;
        // Only hierarchical has choices inside it: one algorithm per level, "-"
        // where the level's group is one rank (here one host: the domain level only).
        const bool hier = std::strcmp(c.algorithm, "hierarchical") == 0;
        const std::string choices = c.choices;
        const bool well_formed =
            hier ? (choices == "ring / - / -" || choices == "rabenseifner / - / -" || choices == "recdoubling / - / -")
                 : choices.empty();
        if (!well_formed) fail(std::string(c.algorithm) + ": choices '" + choices + "'");
        saw_hierarchical |= hier;
      }
      if (low == nullptr || std::strcmp(low->algorithm, ex.model_pick) != 0)
        fail(std::string("explanation's model pick ") + ex.model_pick + " is not its lowest prediction");
      if (measures && !winner_measured) fail(std::string("the settled winner ") + algo + " has no measured time");
      if (want_hierarchical && !saw_hierarchical) fail("explanation: hierarchical is not among the candidates");
    }
    if (!same_everywhere(comm, n, algo, calls)) break;
    // The same size class, another count: the winner, with nothing left to measure.
    const size_t other = count + count / 8;
    const char* algo2 = nullptr;
    int settled2 = 0;
    if (other != count &&
        ok(weftCommGetAlgorithm(comm, "allreduce", other, weftFloat32, 0, &algo2, &settled2), comm, "query")) {
      if (!settled2 || std::strcmp(algo, algo2) != 0)
        fail("count " + std::to_string(other) + " in the class of " + std::to_string(count) + ": " + algo2 +
             (settled2 ? "" : " (not settled)") + ", want " + algo);
      for (int k = 0; k < 3 && g_failures == 0; ++k) checked_allreduce(comm, other, n, k, a, b);
    }
    if (g_failures > 0) break;
  }
  const char* unknown = nullptr;
  if (weftCommGetAlgorithm(comm, "sendrecv", 1, weftFloat32, 0, &unknown, nullptr) != weftInvalidArgument)
    fail("weftCommGetAlgorithm accepted the collective 'sendrecv'");
  weftCommDestroy(comm);
  if (g_failures == 0) std::printf("rank %d: online tuning OK\n", g_rank);
  return g_failures == 0 ? 0 : 1;
}
