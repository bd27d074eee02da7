// Multi-process correctness sweep, run under weft-run: every (dtype, op, count)
// asked for, out-of-place and in-place, checked element by element on every
// rank against expectations computed here from small integers (exact in every
// datatype, distinct per rank: exact_values.h). Prints one summary line per rank;
// exits 1 on any wrong element.
//
//   weft-check-allreduce [--counts 0,1,7] [--dtypes all|float,half,...]
//                        [--ops all|sum,...] [--memalloc] [--iters N]
//                        [--expect-algo [allreduce=]NAME]
//   weft-check-allreduce --self-check
//
// --expect-algo: for every (count, datatype), before its calls, weftCommGetAlgorithm
// must report NAME (the test forces it with WEFT_ALGO), so a forced algorithm that
// silently did not apply fails the run.
// --self-check (no communicator): proves that exact_values.h's inputs have the
// properties the checks rely on, and that the same check rejects the inputs used
// before (ranks r and r + 6 alike); exit 0 when both hold.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "exact_values.h"
#include "weft/weft.h"

namespace {
using namespace weft_test;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    if (end > pos) out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

int index_of(const char* const* names, int n, const std::string& s) {
  for (int i = 0; i < n; ++i)
    if (s == names[i]) return i;
  std::fprintf(stderr, "unknown name %s\n", s.c_str());
  std::exit(2);
}

struct Buffers {
  bool memalloc;
  void* send = nullptr;
  void* recv = nullptr;
  size_t bytes = 0;
  void alloc(size_t b) {
    release();
    bytes = b == 0 ? 64 : b;
    if (memalloc) {
      if (weftMemAlloc(&send, bytes) != weftSuccess || weftMemAlloc(&recv, bytes) != weftSuccess) {
        std::fprintf(stderr, "weftMemAlloc failed: %s\n", weftGetLastError(nullptr));
        std::exit(1);
      }
    } else {
      send = std::malloc(bytes);
      recv = std::malloc(bytes);
    }
  }
  void release() {
    if (send == nullptr) return;
    if (memalloc) weftMemFree(send), weftMemFree(recv);
    else std::free(send), std::free(recv);
    send = recv = nullptr;
  }
};

// The inputs these checks used before: for sum and avg, ranks r and r + 6 gave
// the same values, so a schedule counting rank 0 twice and dropping rank 6 passed
// at 7 and 8 ranks, and every element repeated with period 9. Kept only to show
// that the self-check rejects them.
int64_t old_input(int op, int r, size_t i) {
  switch (op) {
    case weftProd: return 1 + static_cast<int64_t>((i + static_cast<size_t>(r)) % 3 == 0);
    case weftMax:
    case weftMin: return static_cast<int64_t>((i * 7 + static_cast<size_t>(r) * 13) % 23) - 11;
    default: return static_cast<int64_t>((i + static_cast<size_t>(r) * 3) % 9) - 4 + (r % 2);
  }
}

int self_check_main() {
  std::string stats;
  std::string why = self_check(&stats);
  if (!why.empty()) {
    std::printf("FAIL: the test inputs lack properties the checks rely on:\n%s", why.c_str());
    return 1;
  }
  std::printf("ok: inputs exact in every datatype for 1..%d ranks, distinct per rank; every lost or doubled "
              "rank changes the results; no short period\n  (%s)\n", kMaxRanks, stats.c_str());
  std::string old_why = inputs_have_the_properties(old_input);
  if (old_why.empty()) {
    std::printf("FAIL: the self-check accepts the old inputs (ranks r and r + 6 alike): it cannot fail\n");
    return 1;
  }
  std::printf("ok: the self-check rejects the old inputs:\n%s", old_why.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> counts = {"0", "1", "7", "1023", "65537"};
  std::vector<std::string> dtypes(kTypeNames, kTypeNames + 10), ops(kOpNames, kOpNames + 5);
  bool memalloc = false;
  int iters = 1;
  std::string expect_algo;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--self-check") return self_check_main();
    if (a == "--counts" && i + 1 < argc) counts = split(argv[++i]);
    else if (a == "--dtypes" && i + 1 < argc) {
      std::string v = argv[++i];
      if (v != "all") dtypes = split(v);
    } else if (a == "--ops" && i + 1 < argc) {
      std::string v = argv[++i];
      if (v != "all") ops = split(v);
    } else if (a == "--memalloc") memalloc = true;
    else if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--expect-algo" && i + 1 < argc) {
      expect_algo = argv[++i];
      if (expect_algo.rfind("allreduce=", 0) == 0) expect_algo = expect_algo.substr(10);
      if (expect_algo.empty() || expect_algo.find('=') != std::string::npos) {
        std::fprintf(stderr, "--expect-algo takes [allreduce=]NAME\n");
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: %s [--counts a,b] [--dtypes ...] [--ops ...] [--memalloc] [--iters N] "
                   "[--expect-algo [allreduce=]NAME] | --self-check\n",
                   argv[0]);
      return 2;
    }
  }

  weftComm_t comm;
  if (weftCommInitFromEnv(&comm, nullptr) != weftSuccess) {
    std::fprintf(stderr, "init failed: %s\n", weftGetLastError(nullptr));
    return 1;
  }
  int rank, n;
  weftCommUserRank(comm, &rank);
  weftCommCount(comm, &n);
  if (n > kMaxRanks) {
    std::fprintf(stderr, "the exact test values cover at most %d ranks, not %d\n", kMaxRanks, n);
    return 2;
  }

  Buffers buf{memalloc};
  int64_t wrong = 0, calls = 0, failures = 0, checked_algo = 0;
  // Inputs and results repeat every kPeriod elements (exact_values.h), so large
  // counts are filled and checked from one precomputed period.
  std::vector<unsigned char> in_pattern(kPeriod * 8), want_pattern(kPeriod * 8);
  for (const std::string& cs : counts) {
    for (const std::string& ds : dtypes) {
      int type = index_of(kTypeNames, 10, ds);
      size_t es = kTypeSize[type];
      // "64M" means 64 MiB of data in every datatype; a plain number is a count.
      size_t count = std::strtoull(cs.c_str(), nullptr, 0);
      if (!cs.empty() && cs.back() == 'M') count = (count << 20) / es;
      buf.alloc(count * es);
      if (!expect_algo.empty()) {
        const char* name = nullptr;
        if (weftCommGetAlgorithm(comm, "allreduce", count, static_cast<weftDataType_t>(type), 0, &name,
                                 nullptr) != weftSuccess) {
          std::fprintf(stderr, "rank %d: weftCommGetAlgorithm failed: %s\n", rank, weftGetLastError(comm));
          ++failures;
          break;
        }
        ++checked_algo;
        if (expect_algo != name) {
          std::fprintf(stderr, "rank %d: allreduce %s count %zu runs %s, not the forced %s\n", rank, ds.c_str(),
                       count, name, expect_algo.c_str());
          ++failures;
          break;
        }
      }
      const size_t period = std::min(count, kPeriod);
      for (const std::string& os : ops) {
        int op = index_of(kOpNames, 5, os);
        for (size_t i = 0; i < period; ++i) {
          store(in_pattern.data(), type, i, static_cast<double>(input_for(type, op, rank, i)));
          expected(type, op, n, i, want_pattern.data() + i * es);
        }
        for (int in_place = 0; in_place < 2; ++in_place) {
          for (int it = 0; it < iters; ++it) {
            void* src = in_place ? buf.recv : buf.send;
            for (size_t i = 0; i < count; i += kPeriod)
              std::memcpy(static_cast<unsigned char*>(src) + i * es, in_pattern.data(),
                          std::min(kPeriod, count - i) * es);
            if (!in_place) std::memset(buf.recv, 0xA5, count * es);
            ++calls;
            weftResult_t rc = weftAllReduce(src, buf.recv, count, static_cast<weftDataType_t>(type),
                                            static_cast<weftRedOp_t>(op), comm, nullptr);
            if (rc != weftSuccess) {
              std::fprintf(stderr, "rank %d: allreduce %s %s count %zu %s failed: %s\n", rank,
                           ds.c_str(), os.c_str(), count, in_place ? "in-place" : "out-of-place",
                           weftGetLastError(comm));
              ++failures;
              break;
            }
            int64_t bad = 0;
            for (size_t i = 0; i < count; ++i) {
              const unsigned char* want = want_pattern.data() + (i % kPeriod) * es;
              if (std::memcmp(static_cast<unsigned char*>(buf.recv) + i * es, want, es) != 0) {
                if (bad < 3)
                  std::fprintf(stderr, "rank %d: %s %s count %zu %s: element %zu wrong\n", rank,
                               ds.c_str(), os.c_str(), count, in_place ? "in-place" : "out-of-place", i);
                ++bad;
              }
            }
            wrong += bad;
          }
          if (failures) break;
        }
        if (failures) break;
      }
      if (failures) break;
    }
    if (failures) break;
  }
  buf.release();
  std::string algo_note;
  if (!expect_algo.empty())
    algo_note = ", " + std::to_string(checked_algo) + " call shapes checked to run " + expect_algo;
  std::printf("rank %d/%d: %" PRId64 " calls, %" PRId64 " wrong elements, %" PRId64 " failed calls%s%s\n",
              rank, n, calls, wrong, failures, memalloc ? " (weftMemAlloc buffers)" : "", algo_note.c_str());
  if (failures == 0) weftCommDestroy(comm);
  return (wrong == 0 && failures == 0) ? 0 : 1;
}
