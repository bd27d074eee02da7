// Recovery test, run under `weft-run --elastic -n 4`: ranks die (SIGKILL, in the
// middle of large all-reduces) or leave, and the others shrink their
// communicator with weftCommShrink and carry on, checked exactly.
//
//   weft-shrink kill-2 | kill-0 | kill-0-then-1 | leave-3 | twice | mismatch
//
// kill-R...: the listed original ranks die one after another; after each death
// every survivor must get an error naming the dead rank, shrink, abort the old
// communicator promptly, and then run all-reduce, all-gather and broadcast on the
// new one with results computed here from the surviving ranks. kill-0 takes the
// bootstrap root's process with it. leave-3: rank 3 destroys its communicator and
// exits 0; the others shrink without any failure. twice: after rank 3 dies the
// others shrink, then try to shrink the same communicator again, which must fail
// (rank 0's standby socket serves the first), and go on. mismatch: rank 3 dies and rank
// 2 names rank 1 as gone too: every survivor's weftCommShrink must fail before
// its deadline instead of building a wrong communicator or hanging.
// Exit code 0: this rank saw what it should; a victim never exits by itself.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "weft/weft.h"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int g_rank = -1;  // in the first communicator

[[noreturn]] void fail(const char* what, const std::string& why) {
  std::printf("rank %d: FAIL: %s: %s\n", g_rank, what, why.c_str());
  std::fflush(stdout);
  std::exit(1);
}

// What original rank r puts at element i: distinct per rank at every element, so a
// contribution lost, doubled or taken from the wrong rank changes every sum.
int32_t value(int r, size_t i) { return (r + 1) * 100000 + static_cast<int32_t>(i % 9973); }

// Exact all-reduce (sum), all-gather and broadcast over the ranks `alive` (original
// numbering, in the new communicator's order).
void verify(weftComm_t comm, const std::vector<int>& alive) {
  int n = 0, me = -1;
  weftCommCount(comm, &n);
  weftCommUserRank(comm, &me);
  const int want_me = static_cast<int>(std::find(alive.begin(), alive.end(), g_rank) - alive.begin());
  if (n != static_cast<int>(alive.size()) || me != want_me)
    fail("new communicator", "rank " + std::to_string(me) + " of " + std::to_string(n) + ", expected " +
                                 std::to_string(want_me) + " of " + std::to_string(alive.size()));
  for (size_t count : {size_t{0}, size_t{7}, size_t{4099}, size_t{1} << 21}) {
    std::vector<int32_t> in(count), out(count, -1);
    for (size_t i = 0; i < count; ++i) in[i] = value(g_rank, i);
    if (weftAllReduce(in.data(), out.data(), count, weftInt32, weftSum, comm, nullptr) != weftSuccess)
      fail("all-reduce on the new communicator", weftGetLastError(comm));
    for (size_t i = 0; i < count; ++i) {
      int32_t want = 0;
      for (int r : alive) want += value(r, i);
      if (out[i] != want)
        fail("all-reduce", "element " + std::to_string(i) + " of " + std::to_string(count) + " is " +
                               std::to_string(out[i]) + ", expected " + std::to_string(want));
    }
  }
  const size_t per = 1001;
  std::vector<int32_t> mine(per), all(per * alive.size(), -1);
  for (size_t i = 0; i < per; ++i) mine[i] = value(g_rank, i);
  if (weftAllGather(mine.data(), all.data(), per, weftInt32, comm, nullptr) != weftSuccess)
    fail("all-gather on the new communicator", weftGetLastError(comm));
  for (size_t k = 0; k < alive.size(); ++k)
    for (size_t i = 0; i < per; ++i)
      if (all[k * per + i] != value(alive[k], i))
        fail("all-gather", "block " + std::to_string(k) + " element " + std::to_string(i) + " is wrong");
  std::vector<int32_t> b(per);
  for (size_t i = 0; i < per; ++i) b[i] = value(g_rank, i);
  const int root = n - 1;
  if (weftBroadcast(b.data(), b.data(), per, weftInt32, root, comm, nullptr) != weftSuccess)
    fail("broadcast on the new communicator", weftGetLastError(comm));
  for (size_t i = 0; i < per; ++i)
    if (b[i] != value(alive[static_cast<size_t>(root)], i)) fail("broadcast", "element " + std::to_string(i));
}

// Large all-reduces until the communicator fails (the victim kills itself in
// the middle of one); returns the error text.
std::string run_until_failure(weftComm_t comm, bool victim) {
  const size_t count = 4u << 20;  // 16 MiB of float
  std::vector<float> buf(count, 1.0f);
  if (victim)
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      raise(SIGKILL);
    }).detach();
  for (int i = 0; i < 100000; ++i)
    if (weftAllReduce(buf.data(), buf.data(), count, weftFloat32, weftSum, comm, nullptr) != weftSuccess)
      return weftGetLastError(comm);
  fail("all-reduce", "no error although a rank was killed");
}

// Shrinks `comm` without original rank `gone` (its place in `alive`), aborts the
// old one, and checks both took little time.
weftComm_t shrink(weftComm_t comm, std::vector<int>* alive, const std::vector<int>& gone_orig) {
  std::vector<int> exclude;
  for (int g : gone_orig)
    exclude.push_back(static_cast<int>(std::find(alive->begin(), alive->end(), g) - alive->begin()));
  weftComm_t next = nullptr;
  auto t = Clock::now();
  if (weftCommShrink(comm, exclude.data(), static_cast<int>(exclude.size()), &next, nullptr) != weftSuccess)
    fail("weftCommShrink", weftGetLastError(comm));
  const double shrink_s = since(t);
  t = Clock::now();
  if (weftCommAbort(comm) != weftSuccess) fail("weftCommAbort of the failed communicator", weftGetLastError(nullptr));
  const double abort_s = since(t);
  if (abort_s > 3.0) fail("weftCommAbort", "took " + std::to_string(abort_s) + " s");
  for (int g : gone_orig) alive->erase(std::find(alive->begin(), alive->end(), g));
  std::printf("rank %d: shrunk to %zu ranks in %.2f s (old communicator aborted in %.2f s)\n", g_rank, alive->size(),
              shrink_s, abort_s);
  std::fflush(stdout);
  return next;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s kill-2|kill-0|kill-0-then-1|leave-3|twice|mismatch\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  weftComm_t comm;
  if (weftCommInitFromEnv(&comm, nullptr) != weftSuccess) {
    std::fprintf(stderr, "init failed: %s\n", weftGetLastError(nullptr));
    return 1;
  }
  weftCommUserRank(comm, &g_rank);
  int n = 0;
  weftCommCount(comm, &n);
  std::vector<int> alive;
  for (int r = 0; r < n; ++r) alive.push_back(r);

  if (mode == "leave-3") {
    verify(comm, alive);
    if (g_rank == 3) {
      weftCommDestroy(comm);
      std::printf("rank 3: left\n");
      return 0;
    }
    comm = shrink(comm, &alive, {3});
    verify(comm, alive);
  } else if (mode == "twice") {
    // Rank 0's standby socket serves the first shrink's root: shrinking the same
    // communicator again must fail (at once on rank 0, refused on the others),
    // and the first new communicator must work on.
    run_until_failure(comm, g_rank == 3);
    const int gone[] = {3};
    weftComm_t first = nullptr, second = nullptr;
    if (weftCommShrink(comm, gone, 1, &first, nullptr) != weftSuccess) fail("weftCommShrink", weftGetLastError(comm));
    const weftResult_t rc = weftCommShrink(comm, gone, 1, &second, nullptr);
    if (rc == weftSuccess) fail("second weftCommShrink", "succeeded although rank 0's standby socket is taken");
    if (g_rank == 0 && rc != weftInvalidUsage) fail("second weftCommShrink on rank 0", weftGetLastError(comm));
    std::printf("rank %d: the second weftCommShrink failed as it should: %s\n", g_rank, weftGetLastError(comm));
    weftCommAbort(comm);
    comm = first;
    alive = {0, 1, 2};
    verify(comm, alive);
  } else if (mode == "mismatch") {
    if (g_rank != 3) run_until_failure(comm, false);
    else run_until_failure(comm, true);
    std::vector<int> gone = g_rank == 2 ? std::vector<int>{3, 1} : std::vector<int>{3};
    weftComm_t next = nullptr;
    auto t = Clock::now();
    weftResult_t rc = weftCommShrink(comm, gone.data(), static_cast<int>(gone.size()), &next, nullptr);
    const double s = since(t);
    if (rc == weftSuccess) fail("weftCommShrink", "succeeded although rank 2 disagreed on who left");
    std::printf("rank %d: weftCommShrink failed after %.2f s as it should: %s\n", g_rank, s,
                weftGetLastError(comm));
    weftCommAbort(comm);
    return 0;
  } else {
    std::vector<int> victims;
    if (mode == "kill-2") victims = {2};
    else if (mode == "kill-0") victims = {0};
    else if (mode == "kill-0-then-1") victims = {0, 1};
    else fail("arguments", "unknown mode " + mode);
    verify(comm, alive);
    for (int v : victims) {
      auto t = Clock::now();
      std::string err = run_until_failure(comm, g_rank == v);
      const int in_comm = static_cast<int>(std::find(alive.begin(), alive.end(), v) - alive.begin());
      const bool named = err.find("rank " + std::to_string(in_comm)) != std::string::npos;
      std::printf("rank %d: error after %.2f s (%s): %s\n", g_rank, since(t),
                  named ? "names the dead rank" : "DOES NOT name the dead rank", err.c_str());
      if (!named) fail("blame", "the error does not name rank " + std::to_string(in_comm));
      comm = shrink(comm, &alive, {v});
      verify(comm, alive);
    }
  }
  weftCommDestroy(comm);
  std::printf("rank %d: PASS (%zu ranks left, results exact)\n", g_rank, alive.size());
  return 0;
}
