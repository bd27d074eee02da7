// The progress engine across processes (run under weft-run; `initall` alone):
//   split     many non-blocking collectives in flight on 4 communicators split
//             from one (and a split by parity), results checked exactly
//   pipeline  a send/recv pipeline (weftSendAsync/weftRecvAsync) running while
//             all-reduces progress on another communicator
//   threads   two threads per rank, blocking calls on two communicators
//   abort     weftCommAbort from a second thread while every rank is blocked in
//             a 256 MiB all-reduce: every rank's call fails promptly
//   churn     N communicators split, used and destroyed in a loop: no file
//             descriptor or shared-memory segment left behind
//   footprint descriptors, threads and /dev/shm per communicator (printed)
//   abort-sibling  one of two split communicators aborted mid-all-reduce; the other keeps working
//   revoke    weftCommRevoke from a second thread while every rank is blocked in
//             a 64 MiB all-reduce on a split communicator: every call fails
//             promptly; the revoked communicator refuses calls, settles, and
//             still splits and shrinks into communicators with exact results;
//             the world beside it keeps working
//   windows   weftCommWindowRegister/Deregister: symmetric windows of weftMemAlloc
//             memory with an all-reduce on them; every way the ranks can disagree
//             or one rank's arguments be wrong fails on every rank, at once
//   initall   weftCommInitAll: 4 ranks in this process, driven by async calls
//   tuning-state  settled picks saved (WEFT_TUNE_STATE_FILE) and resumed
//   nonblocking-init  weftConfig_t.blocking = 0, polled until ready
//   settings-mismatch  ranks with another WEFT_CHUNK_BYTES: init fails, naming it
//   any-source  weftRecvAnyAsync: a collector takes every other rank's messages
//             in whatever order they come (on world and on a split communicator
//             whose all-reduces run beside), each peer's in its sending order;
//             receives from any rank and from one rank mixed match in posting order
// Expected values are computed here from closed forms, not by the library.
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "process_usage.h"
#include "weft/weft.h"

using weft_test::count_fds;
using weft_test::count_shm_segments;

namespace {

int g_failures = 0;
int g_rank = -1;

void fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL %s\n", g_rank, what.c_str());
  ++g_failures;
}

bool ok(weftResult_t rc, weftComm_t comm, const std::string& what) {
  if (rc == weftSuccess) return true;
  fail(what + ": " + weftGetErrorString(rc) + ": " + weftGetLastError(comm));
  return false;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Rank r's contribution at element i: distinct per rank, exact in float.
float contribution(int r, size_t i) { return static_cast<float>((r + 1) * (1 + static_cast<int>(i % 7))); }
// The sum over ranks 0..n-1: (1 + i % 7) * n(n+1)/2.
float sum_of(int n, size_t i) { return static_cast<float>((1 + static_cast<int>(i % 7)) * n * (n + 1) / 2); }


// Message k of rank r to the collector: element i is r * 1,000,000 + k * 1,000 + i % 1,000 (exact in int32).
int32_t any_value(int r, int k, size_t i) { return r * 1000000 + k * 1000 + static_cast<int32_t>(i % 1000); }

// Every rank but `collector` sends `rounds` messages of `count` int32 to it; the
// collector posts all its receives from any rank at once, then checks who sent what: every message
// once, each sender's in the order sent, the data the sender's.
void any_source_round(weftComm_t comm, int n, int me, int collector, int rounds, size_t count,
                      const std::string& what) {
  if (me != collector) {
    std::vector<std::vector<int32_t>> msgs(static_cast<size_t>(rounds), std::vector<int32_t>(count));
    std::vector<weftRequest_t> reqs(static_cast<size_t>(rounds), nullptr);
    for (int k = 0; k < rounds; ++k) {
      for (size_t i = 0; i < count; ++i) msgs[static_cast<size_t>(k)][i] = any_value(me, k, i);
      if (!ok(weftSendAsync(msgs[static_cast<size_t>(k)].data(), count, weftInt32, collector, comm,
                            &reqs[static_cast<size_t>(k)]), comm, what + ": send")) return;
    }
    for (weftRequest_t& r : reqs) ok(weftWait(&r), comm, what + ": send wait");
    return;
  }
  const int total = (n - 1) * rounds;
  std::vector<std::vector<int32_t>> got(static_cast<size_t>(total), std::vector<int32_t>(count, -1));
  std::vector<int> source(static_cast<size_t>(total), -9);
  std::vector<weftRequest_t> reqs(static_cast<size_t>(total), nullptr);
  for (int j = 0; j < total; ++j)
    if (!ok(weftRecvAnyAsync(got[static_cast<size_t>(j)].data(), count, weftInt32, &source[static_cast<size_t>(j)],
                             comm, &reqs[static_cast<size_t>(j)]), comm, what + ": recv post")) return;
  for (weftRequest_t& r : reqs) ok(weftWait(&r), comm, what + ": recv wait");
  std::vector<int> next(static_cast<size_t>(n), 0);  // each sender's next round
  size_t wrong = 0;
  for (int j = 0; j < total; ++j) {
    const int src = source[static_cast<size_t>(j)];
    if (src < 0 || src >= n || src == collector) {
      fail(what + ": receive " + std::to_string(j) + " names rank " + std::to_string(src));
      return;
    }
    const int k = next[static_cast<size_t>(src)]++;
    for (size_t i = 0; i < count; ++i) wrong += got[static_cast<size_t>(j)][i] != any_value(src, k, i) ? 1 : 0;
  }
  for (int r = 0; r < n; ++r)
    if (r != collector && next[static_cast<size_t>(r)] != rounds)
      fail(what + ": rank " + std::to_string(r) + " sent " + std::to_string(rounds) + " messages, " +
           std::to_string(next[static_cast<size_t>(r)]) + " received");
  if (wrong > 0) fail(what + ": " + std::to_string(wrong) + " wrong elements");
  int first = source[0];
  std::printf("rank %d: %s: %d messages of %zu int32 from %d ranks, first from rank %d, %zu wrong elements\n", me,
              what.c_str(), total, count, n - 1, first, wrong);
}

// Rank 0 posts: from any rank (a), from rank 1 (b), from any rank (c). Rank 1
// sends 100 and 101, rank 2 (if any) 200. Whatever arrives first: rank 1's
// messages go to the receives that got them in posting order, and b gets one.
void any_source_mixed(weftComm_t world, int n, int me) {
  if (me == 0) {
    int32_t a = -1, b = -1, c = -1;
    int sa = -9, sc = -9;
    weftRequest_t ra = nullptr, rb = nullptr, rc = nullptr;
    if (!ok(weftRecvAnyAsync(&a, 1, weftInt32, &sa, world, &ra), world, "mixed: post a") ||
        !ok(weftRecvAsync(&b, 1, weftInt32, 1, world, &rb), world, "mixed: post b"))
      return;
    const bool third = n > 2;
    if (third && !ok(weftRecvAnyAsync(&c, 1, weftInt32, &sc, world, &rc), world, "mixed: post c")) return;
    ok(weftWait(&ra), world, "mixed: a");
    ok(weftWait(&rb), world, "mixed: b");
    if (third) ok(weftWait(&rc), world, "mixed: c");
    // Rank 1's values in posting order among the receives that got them.
    std::vector<int32_t> from1;
    if (sa == 1) from1.push_back(a);
    from1.push_back(b);
    if (third && sc == 1) from1.push_back(c);
    bool good = from1.size() == 2 && from1[0] == 100 && from1[1] == 101;
    if (third) good = good && ((sa == 2 && a == 200) || (sc == 2 && c == 200));
    if (!good)
      fail("mixed: a " + std::to_string(a) + " from " + std::to_string(sa) + ", b " + std::to_string(b) + ", c " +
           std::to_string(c) + " from " + std::to_string(sc));
    std::printf("rank 0: mixed: a=%d (rank %d) b=%d c=%d (rank %d)\n", a, sa, b, c, sc);
  } else if (me == 1 || me == 2) {
    int32_t v[2] = {me * 100, me * 100 + 1};
    for (int k = 0; k < (me == 1 ? 2 : 1); ++k) ok(weftSend(&v[k], 1, weftInt32, 0, world, nullptr), world, "mixed: send");
  }
}

void test_any_source(weftComm_t world, int n, int me) {
  if (n < 2) return;
  any_source_round(world, n, me, 0, 40, 1025, "world, 4 KiB");
  // Past the eager limit: read in place (or through the FIFO) by the receiver.
  any_source_round(world, n, me, n - 1, 3, 300000, "world, 1.2 MB");
  // A split communicator (ranks reversed) shares the channels with world, whose
  // all-reduces run at the same time: messages of both interleave on each pair.
  weftComm_t rev = nullptr;
  if (!ok(weftCommSplit(world, 0, n - 1 - me, &rev, nullptr), world, "split")) return;
  std::vector<float> grads(4096);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = contribution(me, i);
  std::vector<weftRequest_t> reduces(8, nullptr);
  for (weftRequest_t& r : reduces)
    if (!ok(weftAllReduceAsync(grads.data(), grads.data(), 4096, weftFloat32, weftSum, world, &r), world,
            "all-reduce post")) return;
  any_source_round(rev, n, n - 1 - me, 0, 20, 999, "split, beside all-reduces");
  for (weftRequest_t& r : reduces) ok(weftWait(&r), world, "all-reduce wait");
  // Eight in-place sums: n^7 times the sum of the contributions.
  size_t wrong = 0;
  for (size_t i = 0; i < grads.size(); ++i) wrong += grads[i] != sum_of(n, i) * std::pow(static_cast<float>(n), 7.0f) ? 1 : 0;
  if (wrong > 0) fail("all-reduces beside: " + std::to_string(wrong) + " wrong elements");
  ok(weftCommDestroy(rev), rev, "destroy");
  any_source_mixed(world, n, me);
  ok(weftBarrier(world), world, "barrier");
}

// 4 communicators split from world with all ranks (keys reversed in two, so
// ranks are numbered differently), plus one per parity; every one gets several
// all-reduces of different sizes posted before any is waited for.
void test_split(weftComm_t world, int n, int me) {
  constexpr int kComms = 4, kOps = 6;
  weftComm_t comms[kComms + 1] = {};
  for (int k = 0; k < kComms; ++k) {
    int key = k % 2 == 0 ? me : n - 1 - me;
    if (!ok(weftCommSplit(world, 0, key, &comms[k], nullptr), world, "split " + std::to_string(k))) return;
    int rank = -1, size = 0;
    weftCommUserRank(comms[k], &rank);
    weftCommCount(comms[k], &size);
    if (rank != key || size != n)
      fail("split " + std::to_string(k) + ": rank " + std::to_string(rank) + " of " + std::to_string(size) +
           ", expected " + std::to_string(key) + " of " + std::to_string(n));
  }
  if (!ok(weftCommSplit(world, me % 2, me, &comms[kComms], nullptr), world, "split by parity")) return;
  const int parity_size = (n + 1 - me % 2) / 2;
  std::vector<std::vector<float>> bufs;
  std::vector<weftRequest_t> reqs;
  std::vector<std::pair<int, int>> which;  // (comm, op)
  for (int op = 0; op < kOps; ++op)
    for (int k = 0; k <= kComms; ++k) {
      size_t count = size_t{1} << (4 + 3 * op);  // 16 .. 512 Ki elements
      int rank = -1;
      weftCommUserRank(comms[k], &rank);
      std::vector<float> b(count);
      for (size_t i = 0; i < count; ++i) b[i] = contribution(rank, i);
      bufs.push_back(std::move(b));
      weftRequest_t r = nullptr;
      if (!ok(weftAllReduceAsync(bufs.back().data(), bufs.back().data(), count, weftFloat32, weftSum, comms[k], &r),
              comms[k], "post")) return;
      reqs.push_back(r);
      which.push_back({k, op});
    }
  // Poll them all together, in no particular order, until every one is done.
  size_t left = reqs.size();
  auto t0 = std::chrono::steady_clock::now();
  while (left > 0 && seconds_since(t0) < 120) {
    for (size_t j = 0; j < reqs.size(); ++j) {
      if (reqs[j] == nullptr) continue;
      int done = 0;
      weftResult_t rc = weftTest(&reqs[j], &done);
      if (rc == weftInProgress) continue;
      --left;
      ok(rc, comms[which[j].first], "test");
    }
  }
  if (left > 0) fail(std::to_string(left) + " operations still pending after 120 s");
  for (size_t j = 0; j < bufs.size(); ++j) {
    int size = which[j].first == kComms ? parity_size : n;
    size_t wrong = 0;
    for (size_t i = 0; i < bufs[j].size(); ++i) wrong += bufs[j][i] != sum_of(size, i) ? 1 : 0;
    if (wrong > 0)
      fail("comm " + std::to_string(which[j].first) + " op " + std::to_string(which[j].second) + ": " +
           std::to_string(wrong) + " wrong elements");
  }
  for (weftComm_t c : comms) ok(weftCommDestroy(c), c, "destroy");
  std::printf("rank %d: split: %zu operations on %d communicators, %d failures\n", me, reqs.size(), kComms + 1,
              g_failures);
}

// Two threads per rank, each making blocking calls on its own communicator
// (as a data-parallel thread beside a pipeline thread would): both progress,
// results exact; under TSan this exercises the per-call shortcuts from threads.
void test_threads(weftComm_t world, int n, int me) {
  weftComm_t comms[2] = {};
  for (weftComm_t& c : comms)
    if (!ok(weftCommSplit(world, 0, me, &c, nullptr), world, "split")) return;
  std::atomic<int> wrong{0};
  auto work = [&](int t) {
    weftComm_t c = comms[t];
    std::vector<float> v(t == 0 ? 1000 : 200000);
    for (int k = 0; k < 60; ++k) {
      for (size_t i = 0; i < v.size(); ++i) v[i] = contribution(me, i + static_cast<size_t>(k));
      if (weftAllReduce(v.data(), v.data(), v.size(), weftFloat32, weftSum, c, nullptr) != weftSuccess) {
        fail(std::string("thread ") + std::to_string(t) + ": " + weftGetLastError(c));
        return;
      }
      for (size_t i = 0; i < v.size(); ++i) wrong += v[i] != sum_of(n, i + static_cast<size_t>(k)) ? 1 : 0;
    }
  };
  std::thread other(work, 1);
  work(0);
  other.join();
  if (wrong > 0) fail("threads: " + std::to_string(wrong.load()) + " wrong elements");
  for (weftComm_t c : comms) ok(weftCommDestroy(c), c, "destroy");
  std::printf("rank %d: threads: two threads, two communicators, %d wrong elements\n", me, wrong.load());
}

// Stage r receives micro-batch m from r-1, adds its contribution and sends it to
// r+1, while an all-reduce per micro-batch runs on a second communicator.
void test_pipeline(weftComm_t world, int n, int me) {
  constexpr int kMicro = 16;
  constexpr size_t kCount = 100000;
  weftComm_t dp = nullptr;
  if (!ok(weftCommSplit(world, 0, me, &dp, nullptr), world, "split")) return;
  std::vector<std::vector<float>> act(kMicro, std::vector<float>(kCount, 0.0f));
  std::vector<std::vector<float>> grads(kMicro, std::vector<float>(kCount));
  std::vector<weftRequest_t> sends, reduces;
  for (int m = 0; m < kMicro; ++m) {
    for (size_t i = 0; i < kCount; ++i) grads[m][i] = contribution(me, i + static_cast<size_t>(m));
    weftRequest_t r = nullptr;
    if (!ok(weftAllReduceAsync(grads[m].data(), grads[m].data(), kCount, weftFloat32, weftSum, dp, &r), dp,
            "all-reduce post")) return;
    reduces.push_back(r);
    if (me > 0) {
      weftRequest_t rr = nullptr;
      if (!ok(weftRecvAsync(act[m].data(), kCount, weftFloat32, me - 1, world, &rr), world, "recv post") ||
          !ok(weftWait(&rr), world, "recv " + std::to_string(m)))
        return;
    }
    for (size_t i = 0; i < kCount; ++i) act[m][i] += static_cast<float>(me + 1) * static_cast<float>(m + 1);
    if (me < n - 1) {
      weftRequest_t s = nullptr;
      if (!ok(weftSendAsync(act[m].data(), kCount, weftFloat32, me + 1, world, &s), world, "send post")) return;
      sends.push_back(s);
    }
  }
  for (weftRequest_t& s : sends) ok(weftWait(&s), world, "send wait");
  for (weftRequest_t& r : reduces) ok(weftWait(&r), dp, "all-reduce wait");
  size_t wrong = 0;
  for (int m = 0; m < kMicro; ++m) {
    // After stage me: sum over stages 0..me of (s + 1) * (m + 1).
    float want = static_cast<float>((me + 1) * (me + 2) / 2 * (m + 1));
    for (size_t i = 0; i < kCount; ++i) {
      wrong += act[m][i] != want ? 1 : 0;
      wrong += grads[m][i] != sum_of(n, i + static_cast<size_t>(m)) ? 1 : 0;
    }
  }
  if (wrong > 0) fail("pipeline: " + std::to_string(wrong) + " wrong elements");
  ok(weftCommDestroy(dp), dp, "destroy");
  std::printf("rank %d: pipeline: %d micro-batches beside %d all-reduces, %zu wrong elements\n", me, kMicro, kMicro,
              wrong);
}

// Every rank blocks in a 256 MiB all-reduce (the last one joins 2 s late, so the
// others are surely blocked); 1 s in, rank 0 aborts from a second thread.
void test_abort(weftComm_t world, int n, int me) {
  const size_t count = (size_t{256} << 20) / sizeof(float);
  std::vector<float> buf(count, 1.0f);
  weftBarrier(world);
  auto t0 = std::chrono::steady_clock::now();
  std::atomic<double> aborted_at{-1};
  std::thread aborter;
  if (me == 0)
    aborter = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      double t = seconds_since(t0);
      weftResult_t rc = weftCommAbort(world);
      aborted_at = t;
      if (rc != weftSuccess) fail(std::string("weftCommAbort: ") + weftGetErrorString(rc));
    });
  if (me == n - 1) std::this_thread::sleep_for(std::chrono::seconds(2));
  weftResult_t rc = weftAllReduce(buf.data(), buf.data(), count, weftFloat32, weftSum, world, nullptr);
  double returned = seconds_since(t0);
  std::string why = weftGetLastError(nullptr);
  if (aborter.joinable()) aborter.join();
  if (rc == weftSuccess) fail("the all-reduce succeeded although rank 0 aborted");
  // The deadline is WEFT_TIMEOUT_MS (60 s here): anything near it means the
  // abort did not unblock the call.
  double limit = me == n - 1 ? 2 + 5 : 1 + 5;
  if (returned > limit) fail("the call returned " + std::to_string(returned) + " s after the start");
  std::printf("rank %d: abort: call returned %s after %.2f s (abort at %.2f s): %s\n", me, weftGetErrorString(rc),
              returned, me == 0 ? aborted_at.load() : 1.0, why.c_str());
  if (me != 0) weftCommDestroy(world);
}

// Two communicators split from the world share its channels and bootstrap
// connection. Rank 0 aborts one while the ranks are inside a 64 MiB all-reduce
// on it and a second thread on every rank runs all-reduces on the other: that
// one's results stay exact before, during and after, and so do the world's.
void test_abort_sibling(weftComm_t world, int n, int me) {
  weftComm_t doomed = nullptr, sibling = nullptr;
  if (!ok(weftCommSplit(world, 0, me, &doomed, nullptr), world, "split") ||
      !ok(weftCommSplit(world, 0, me, &sibling, nullptr), world, "split"))
    return;
  // The same number of sibling calls on every rank (collectives must match),
  // enough to last past the abort.
  constexpr int kSiblingCalls = 1000;
  std::atomic<int> sibling_calls{0};
  std::thread traffic([&] {
    constexpr size_t kCount = (size_t{1} << 20) / sizeof(float);
    std::vector<float> v(kCount);
    for (int call = 0; call < kSiblingCalls; ++call) {
      for (size_t i = 0; i < kCount; ++i) v[i] = contribution(me, i);
      if (!ok(weftAllReduce(v.data(), v.data(), kCount, weftFloat32, weftSum, sibling, nullptr), sibling,
              "sibling all-reduce"))
        return;
      for (size_t i = 0; i < kCount; ++i)
        if (v[i] != sum_of(n, i)) {
          fail("sibling all-reduce: element " + std::to_string(i) + " is " + std::to_string(v[i]));
          return;
        }
      ++sibling_calls;
    }
  });
  const size_t big = (size_t{64} << 20) / sizeof(float);
  std::vector<float> buf(big, 1.0f);
  auto t0 = std::chrono::steady_clock::now();
  std::thread aborter;
  if (me == 0)
    aborter = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      if (weftCommAbort(doomed) != weftSuccess) fail("weftCommAbort failed");
    });
  if (me == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(600));
  weftResult_t rc = weftAllReduce(buf.data(), buf.data(), big, weftFloat32, weftSum, doomed, nullptr);
  double returned = seconds_since(t0);
  if (aborter.joinable()) aborter.join();
  if (rc == weftSuccess) fail("the all-reduce on the aborted communicator succeeded");
  if (returned > 10) fail("the aborted all-reduce returned after " + std::to_string(returned) + " s");
  if (me != 0) weftCommDestroy(doomed);
  const int before = sibling_calls.load();  // sibling calls done when the aborted call returned
  traffic.join();
  if (sibling_calls.load() != kSiblingCalls) fail("the sibling's calls stopped");
  for (int round = 0; round < 3; ++round) {
    int x = me + 1, y = me + 1;
    ok(weftAllReduce(&x, &x, 1, weftInt32, weftSum, sibling, nullptr), sibling, "sibling after the abort");
    ok(weftAllReduce(&y, &y, 1, weftInt32, weftSum, world, nullptr), world, "world after the abort");
    if (x != n * (n + 1) / 2 || y != n * (n + 1) / 2)
      fail("after the abort: sibling gave " + std::to_string(x) + ", world " + std::to_string(y));
  }
  ok(weftCommDestroy(sibling), sibling, "destroy sibling");
  std::printf("rank %d: abort-sibling: aborted call returned %s after %.2f s, after %d of %d sibling all-reduces; all "
              "exact\n",
              me, weftGetErrorString(rc), returned, before, kSiblingCalls);
}

// The sum of (r + 1) over the ranks r of `members` (world numbering), for a
// communicator of them: each rank contributes its world rank + 1.
bool check_member_sum(weftComm_t comm, int me, const std::vector<int>& members, const std::string& what) {
  int x = me + 1, want = 0;
  for (int r : members) want += r + 1;
  if (!ok(weftAllReduce(&x, &x, 1, weftInt32, weftSum, comm, nullptr), comm, what)) return false;
  if (x != want) fail(what + ": gave " + std::to_string(x) + ", not " + std::to_string(want));
  return x == want;
}

void test_revoke(weftComm_t world, int n, int me) {
  weftComm_t doomed = nullptr;
  if (!ok(weftCommSplit(world, 0, me, &doomed, nullptr), world, "split")) return;
  if (weftCommRevoke(doomed, 1) != weftInvalidArgument) fail("weftCommRevoke with flags 1 was not refused");
  const size_t big = (size_t{64} << 20) / sizeof(float);
  std::vector<float> buf(big, 1.0f);
  weftBarrier(world);
  auto t0 = std::chrono::steady_clock::now();
  std::thread revoker;
  if (me == 0)
    revoker = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      ok(weftCommRevoke(doomed, WEFT_REVOKE_DEFAULT), doomed, "weftCommRevoke");
    });
  // The last rank joins late, so that the others are surely blocked.
  if (me == n - 1) std::this_thread::sleep_for(std::chrono::seconds(2));
  weftResult_t rc = weftAllReduce(buf.data(), buf.data(), big, weftFloat32, weftSum, doomed, nullptr);
  const double returned = seconds_since(t0);
  const std::string why = weftGetLastError(nullptr);
  if (revoker.joinable()) revoker.join();
  if (rc == weftSuccess) fail("the all-reduce succeeded although rank 0 revoked the communicator");
  if (why.find("revoked") == std::string::npos) fail("the failed all-reduce does not say it was revoked: " + why);
  // WEFT_TIMEOUT_MS is 60 s here: anything near it means the revoke did not stop the call.
  if (returned > (me == n - 1 ? 2 + 5 : 1 + 5)) fail("the call returned " + std::to_string(returned) + " s after the start");

  // Every rank learns of it and settles: weftInProgress while anything runs, then weftSuccess.
  weftResult_t state = weftInProgress;
  auto t1 = std::chrono::steady_clock::now();
  while (state == weftInProgress && seconds_since(t1) < 10) {
    if (!ok(weftCommGetAsyncError(doomed, &state), doomed, "weftCommGetAsyncError")) break;
    if (state == weftInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (state != weftSuccess) fail(std::string("the revoked communicator's state is ") + weftGetErrorString(state));
  int x = 1;
  if (weftAllReduce(&x, &x, 1, weftInt32, weftSum, doomed, nullptr) != weftInvalidUsage ||
      std::string(weftGetLastError(doomed)).find("revoked") == std::string::npos)
    fail("a call on the revoked communicator was not refused as revoked");

  // Management still works: a split by parity, then a shrink without the last rank.
  std::vector<int> all, same_parity, stay;
  for (int r = 0; r < n; ++r) {
    all.push_back(r);
    if (r % 2 == me % 2) same_parity.push_back(r);
    if (r != n - 1) stay.push_back(r);
  }
  weftComm_t half = nullptr;
  // A split of a healthy communicator shares its family's channels and connections
  // (no new descriptor or segment: engine-footprint); one of a revoked communicator
  // must not, as those may hold the remains of the stopped calls.
  const int held = count_fds() + count_shm_segments();
  if (ok(weftCommSplit(doomed, me % 2, me, &half, nullptr), doomed, "split of the revoked communicator")) {
    const int now = count_fds() + count_shm_segments();
    if (same_parity.size() > 1 && now <= held)
      fail("the split of the revoked communicator opened no channel or connection of its own (" +
           std::to_string(held) + " descriptors and segments before, " + std::to_string(now) + " after)");
    for (int round = 0; round < 3; ++round) check_member_sum(half, me, same_parity, "all-reduce on its split");
    ok(weftCommDestroy(half), half, "destroy the split");
  }
  if (me != n - 1) {
    const int gone = n - 1;
    weftComm_t shrunk = nullptr;
    if (ok(weftCommShrink(doomed, &gone, 1, &shrunk, nullptr), doomed, "shrink of the revoked communicator")) {
      for (int round = 0; round < 3; ++round) check_member_sum(shrunk, me, stay, "all-reduce on its shrink");
      ok(weftCommDestroy(shrunk), shrunk, "destroy the shrink");
    }
  }
  ok(weftCommDestroy(doomed), doomed, "destroy the revoked communicator");
  // The world, a sibling of the revoked one sharing its channels, is untouched.
  for (int round = 0; round < 3; ++round) check_member_sum(world, me, all, "world after the revoke");
  std::printf("rank %d: revoke: call returned %s after %.2f s: %s\n", me,
              weftGetErrorString(rc), returned, why.c_str());
}

// Registers on every rank with this rank's arguments; expects `want` here and
// the message to contain `says`, well before the deadline (20 s here).
void window_case(weftComm_t comm, void* buff, size_t size, int flags, weftResult_t want, const char* says,
                 const std::string& what) {
  auto t0 = std::chrono::steady_clock::now();
  weftWindow_t win = nullptr;
  weftResult_t rc = weftCommWindowRegister(comm, buff, size, &win, flags);
  const std::string why = weftGetLastError(comm);
  if (rc != want) fail(what + ": " + weftGetErrorString(rc) + ", not " + weftGetErrorString(want) + ": " + why);
  else if (rc != weftSuccess && why.find(says) == std::string::npos) fail(what + ": the error does not say '" + says + "': " + why);
  if (seconds_since(t0) > 5) fail(what + ": took " + std::to_string(seconds_since(t0)) + " s");
  if (rc == weftSuccess) ok(weftCommWindowDeregister(comm, win), comm, what + ": deregister");
  else if (win != nullptr) fail(what + ": a refused window was returned");
}

void test_windows(weftComm_t world, int n, int me) {
  constexpr size_t kCount = 262147;
  const size_t bytes = (kCount * sizeof(float) + WEFT_WIN_REQUIRED_ALIGNMENT - 1) / WEFT_WIN_REQUIRED_ALIGNMENT *
                       WEFT_WIN_REQUIRED_ALIGNMENT;
  void* mem = nullptr;
  if (!ok(weftMemAlloc(&mem, bytes + WEFT_WIN_REQUIRED_ALIGNMENT), world, "weftMemAlloc")) return;
  if (reinterpret_cast<uintptr_t>(mem) % WEFT_WIN_REQUIRED_ALIGNMENT != 0) fail("weftMemAlloc memory is not page-aligned");
  weftWindow_t win = nullptr;
  if (ok(weftCommWindowRegister(world, mem, bytes, &win, WEFT_WIN_COLL_SYMMETRIC), world, "symmetric window")) {
    auto* v = static_cast<float*>(mem);
    for (size_t i = 0; i < kCount; ++i) v[i] = contribution(me, i);
    if (ok(weftAllReduce(v, v, kCount, weftFloat32, weftSum, world, nullptr), world, "all-reduce on the window"))
      for (size_t i = 0; i < kCount; ++i)
        if (v[i] != sum_of(n, i)) {
          fail("all-reduce on the window: element " + std::to_string(i) + " is " + std::to_string(v[i]));
          break;
        }
    ok(weftCommWindowDeregister(world, win), world, "deregister");
    if (weftCommWindowDeregister(world, win) != weftInvalidArgument) fail("a second deregister was not refused");
  }
  auto* base = static_cast<unsigned char*>(mem);
  // Sizes may differ without the symmetric flag.
  window_case(world, mem, 4096 * static_cast<size_t>(me + 1), WEFT_WIN_DEFAULT, weftSuccess, "", "sizes per rank");
  if (n > 1) {
    window_case(world, mem, 4096 * static_cast<size_t>(me + 1), WEFT_WIN_COLL_SYMMETRIC, weftInvalidUsage,
                "one size on every rank", "symmetric sizes differing");
    window_case(world, mem, 4096, me == 0 ? WEFT_WIN_DEFAULT : WEFT_WIN_COLL_SYMMETRIC, weftInvalidUsage, "flags",
                "flags differing");
    // The last rank's window is misaligned: it is told why, the others who.
    const bool bad = me == n - 1;
    window_case(world, bad ? base + 64 : base, 4096, WEFT_WIN_COLL_SYMMETRIC,
                bad ? weftInvalidArgument : weftInvalidUsage,
                bad ? "WEFT_WIN_REQUIRED_ALIGNMENT" : ("rank " + std::to_string(n - 1) + "'s arguments").c_str(),
                "one rank misaligned");
  }
  window_case(world, nullptr, 4096, WEFT_WIN_DEFAULT, weftInvalidArgument, "NULL", "NULL buffer");
  window_case(world, mem, 4096, 4, weftInvalidArgument, "unknown flags", "unknown flags");
  // Left registered: destroy frees it.
  ok(weftCommWindowRegister(world, mem, bytes, &win, WEFT_WIN_COLL_SYMMETRIC), world, "window left for destroy");
  weftBarrier(world);
  std::printf("rank %d: windows: %d failures\n", me, g_failures);
}

void test_churn(weftComm_t world, int me, int rounds) {
  // One communicator first, so that lazily created state (the engine, caches) is there.
  weftComm_t c = nullptr;
  if (!ok(weftCommSplit(world, 0, me, &c, nullptr), world, "split")) return;
  ok(weftCommDestroy(c), c, "destroy");
  weftBarrier(world);
  int fds = count_fds(), segs = count_shm_segments();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds && g_failures == 0; ++i) {
    if (!ok(weftCommSplit(world, 0, me, &c, nullptr), world, "split " + std::to_string(i))) return;
    int x = me + 1, n = 0;
    weftCommCount(c, &n);
    ok(weftAllReduce(&x, &x, 1, weftInt32, weftSum, c, nullptr), c, "all-reduce");
    if (x != n * (n + 1) / 2) fail("all-reduce on communicator " + std::to_string(i) + " gave " + std::to_string(x));
    ok(weftCommDestroy(c), c, "destroy " + std::to_string(i));
  }
  weftBarrier(world);
  // Roots of split communicators end once every rank has left: give them a moment.
  int fds_after = count_fds();
  for (int t = 0; t < 50 && fds_after > fds; ++t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fds_after = count_fds();
  }
  int segs_after = count_shm_segments();
  if (fds_after > fds) fail("file descriptors " + std::to_string(fds) + " -> " + std::to_string(fds_after));
  if (segs_after > segs) fail("weft shm segments " + std::to_string(segs) + " -> " + std::to_string(segs_after));
  std::printf("rank %d: churn: %d communicators in %.1f s, fds %d -> %d, weft shm segments %d -> %d\n", me, rounds,
              seconds_since(t0), fds, fds_after, segs, segs_after);
}

// What one more communicator costs this process: descriptors, threads and
// /dev/shm bytes (segments stay in use, unlinked, while mapped), measured over
// `count` communicators split from world. Prints; fails only on a leak after
// they are destroyed.
long shm_used_bytes() {
  struct statvfs v {};
  if (statvfs("/dev/shm", &v) != 0) return -1;
  return static_cast<long>((v.f_blocks - v.f_bfree) * v.f_frsize);
}
int count_threads() {
  FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  while (f != nullptr && std::fgets(line, sizeof(line), f) != nullptr)
    if (std::sscanf(line, "Threads: %d", &n) == 1) break;
  if (f != nullptr) std::fclose(f);
  return n;
}
// A job's footprint: one communicator made by init, then `count` split from it,
// each moving 16 MiB (every FIFO slot touched: tmpfs counts pages in use). The
// split ones open contexts on the first one's shared-memory channels and groups
// on its bootstrap connection, so the job's /dev/shm, descriptors and threads
// stay about those of one communicator: 64 communicators at 8 ranks must fit in
// Docker's default 64 MiB.
void test_footprint(weftComm_t world, int n, int me, int count) {
  weftBarrier(world);
  const int fds = count_fds(), threads = count_threads();
  const long shm = shm_used_bytes();
  weftUniqueId id{};
  if (me == 0 && !ok(weftGetUniqueId(&id), world, "unique id")) return;
  if (!ok(weftBroadcast(&id, &id, sizeof(id), weftUint8, 0, world, nullptr), world, "broadcast id")) return;
  weftComm_t first = nullptr;
  if (!ok(weftCommInitRank(&first, n, id, me), nullptr, "init")) return;
  std::vector<float> big((size_t{16} << 20) / sizeof(float), 1.0f);
  ok(weftAllReduce(big.data(), big.data(), big.size(), weftFloat32, weftSum, first, nullptr), first, "all-reduce");
  weftBarrier(world);
  const int fds_first = count_fds(), threads_first = count_threads();
  const long shm_first = shm_used_bytes();
  std::vector<weftComm_t> comms(static_cast<size_t>(count));
  for (weftComm_t& c : comms)
    if (!ok(weftCommSplit(first, 0, me, &c, nullptr), first, "split")) return;
  for (weftComm_t c : comms)
    ok(weftAllReduce(big.data(), big.data(), big.size(), weftFloat32, weftSum, c, nullptr), c, "all-reduce");
  weftBarrier(world);
  const int fds_with = count_fds(), threads_with = count_threads();
  const long shm_with = shm_used_bytes();
  for (weftComm_t c : comms) ok(weftCommDestroy(c), c, "destroy");
  ok(weftCommDestroy(first), first, "destroy");
  weftBarrier(world);
  const double mib = 1 << 20, per_split = static_cast<double>(shm_with - shm_first) / count / mib;
  if (me == 0 || me == n - 1)
    std::printf("footprint: %d ranks, rank %d%s: the first communicator %d descriptors, %d threads; each of %d split "
                "from it %.1f descriptors, %.1f threads. /dev/shm (all ranks of this host): the first %.1f MiB, each "
                "split one %.3f MiB, %.1f MiB in all\n",
                n, me, me == 0 ? " (where the bootstrap root runs)" : "", fds_first - fds, threads_first - threads,
                count, static_cast<double>(fds_with - fds_first) / count,
                static_cast<double>(threads_with - threads_first) / count,
                static_cast<double>(shm_first - shm) / mib, per_split, static_cast<double>(shm_with - shm) / mib);
  if (per_split > 0.25)
    fail("a split communicator added " + std::to_string(per_split) + " MiB of /dev/shm: it did not share its parent's channels");
  if (fds_with - fds_first > count / 4 || threads_with > threads_first)
    fail("split communicators added " + std::to_string(fds_with - fds_first) + " descriptors and " +
         std::to_string(threads_with - threads_first) + " threads: they did not share the bootstrap");
  if (count >= 64 && shm_with - shm > (long{64} << 20))
    fail("64 communicators at " + std::to_string(n) + " ranks use more than 64 MiB of /dev/shm");
  int fds_after = count_fds();
  for (int t = 0; t < 50 && fds_after > fds; ++t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fds_after = count_fds();
  }
  if (fds_after > fds) fail("descriptors " + std::to_string(fds) + " -> " + std::to_string(fds_after));
}

// Buffers that the CUDA driver calls device memory (a stand-in here, loaded as an
// application loads the real one) are refused by every call that takes one,
// naming the buffer and the GPU; the communicator stays usable with host memory.
void test_initall() {
  constexpr int kRanks = 4;
  constexpr size_t kCount = 300000;
  weftComm_t comms[kRanks];
  if (!ok(weftCommInitAll(comms, kRanks, nullptr), nullptr, "weftCommInitAll")) return;
  std::vector<std::vector<float>> bufs(kRanks, std::vector<float>(kCount));
  weftRequest_t reqs[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < kCount; ++i) bufs[r][i] = contribution(r, i);
    ok(weftAllReduceAsync(bufs[r].data(), bufs[r].data(), kCount, weftFloat32, weftSum, comms[r], &reqs[r]),
       comms[r], "post");
  }
  for (int r = 0; r < kRanks; ++r) ok(weftWait(&reqs[r]), comms[r], "wait");
  size_t wrong = 0;
  for (int r = 0; r < kRanks; ++r)
    for (size_t i = 0; i < kCount; ++i) wrong += bufs[r][i] != sum_of(kRanks, i) ? 1 : 0;
  if (wrong > 0) fail("initall: " + std::to_string(wrong) + " wrong elements");
  for (weftComm_t c : comms) ok(weftCommDestroy(c), c, "destroy");
  weftComm_t none[1];
  if (weftCommInitAll(none, 1, &kRanks) != weftInvalidArgument) fail("initall with a devlist was not refused");
  std::printf("initall: %d ranks in one process, %zu wrong elements\n", kRanks, wrong);
}

}  // namespace

// Size classes settled on one communicator are settled at once on the next,
// which loads them from WEFT_TUNE_STATE_FILE (rank 0 wrote it as they settled);
// weftCommGetTuning gives the same text on both.
void test_tuning_state(weftComm_t world, int me, const std::string& path) {
  const size_t counts[] = {256, 16384, 262144};
  const char* names[3] = {};
  std::string text[2];
  for (int phase = 0; phase < 2; ++phase) {
    weftComm_t c = nullptr;
    if (!ok(weftCommSplit(world, 0, me, &c, nullptr), world, "split")) return;
    for (int k = 0; k < 3; ++k) {
      std::vector<float> v(counts[k], 1.0f);
      const char* algo = nullptr;
      int settled = 0, calls = 0;
      ok(weftCommGetAlgorithm(c, "allreduce", counts[k], weftFloat32, 0, &algo, &settled), c, "query");
      if (phase == 1 && (settled != 1 || std::strcmp(algo, names[k]) != 0))
        fail("count " + std::to_string(counts[k]) + ": the resumed communicator runs " + algo +
             (settled ? " (settled)" : " (not settled)") + ", the first settled on " + names[k]);
      for (; settled == 0 && calls < 400000; ++calls) {
        ok(weftAllReduce(v.data(), v.data(), counts[k], weftFloat32, weftMax, c, nullptr), c, "all-reduce");
        ok(weftCommGetAlgorithm(c, "allreduce", counts[k], weftFloat32, 0, &algo, &settled), c, "query");
      }
      if (settled == 0) fail("count " + std::to_string(counts[k]) + " did not settle in " + std::to_string(calls) + " calls");
      if (phase == 0) names[k] = algo;
      if (phase == 1 && calls > 0) fail("the resumed communicator measured count " + std::to_string(counts[k]));
    }
    size_t needed = 0;
    ok(weftCommGetTuning(c, nullptr, 0, &needed), c, "get tuning size");
    std::vector<char> buf(needed);
    ok(weftCommGetTuning(c, buf.data(), buf.size(), &needed), c, "get tuning");
    text[phase] = buf.data();
    ok(weftCommDestroy(c), c, "destroy");
  }
  int lines = 0;
  for (char ch : text[0]) lines += ch == '\n' ? 1 : 0;
  if (lines != 3) fail("the first communicator's state has " + std::to_string(lines) + " lines:\n" + text[0]);
  if (text[1] != text[0]) fail("states differ:\n" + text[0] + "--- and ---\n" + text[1]);
  if (me == 0) {
    FILE* f = std::fopen(path.c_str(), "r");
    std::string file;
    for (int ch; f != nullptr && (ch = std::fgetc(f)) != EOF;) file += static_cast<char>(ch);
    if (f != nullptr) std::fclose(f);
    if (file != text[0]) fail("WEFT_TUNE_STATE_FILE holds:\n" + file + "--- not ---\n" + text[0]);
    std::remove(path.c_str());
  }
  std::printf("rank %d: tuning state: %s / %s / %s resumed settled\n", me, names[0], names[1], names[2]);
}

// Rank 1 (and 3) run with another WEFT_CHUNK_BYTES: init must fail on every
// rank, naming the setting and which ranks hold which value.
int test_settings_mismatch() {
  int rank = std::atoi(std::getenv("WEFT_RANK") ? std::getenv("WEFT_RANK") : "-1");
  int n = std::atoi(std::getenv("WEFT_NRANKS") ? std::getenv("WEFT_NRANKS") : "0");
  g_rank = rank;
  if (rank % 2 == 1) setenv("WEFT_CHUNK_BYTES", "65536", 1);
  weftComm_t world = nullptr;
  weftResult_t rc = weftCommInitFromEnv(&world, nullptr);
  std::string why = weftGetLastError(nullptr);
  std::string want = "WEFT_CHUNK_BYTES differs between ranks: 1048576 on rank";
  want += n > 3 ? "s 0, 2; 65536 on ranks 1, 3" : " 0; 65536 on rank 1";
  if (rc != weftInvalidUsage) fail(std::string("init returned ") + weftGetErrorString(rc) + ": " + why);
  else if (why.find(want) == std::string::npos) fail("message '" + why + "' lacks '" + want + "'");
  if (world != nullptr) weftCommDestroy(world);
  std::printf("rank %d: settings mismatch: %s\n", rank, why.c_str());
  return g_failures == 0 ? 0 : 1;
}

// weftConfig_t.blocking = 0: init returns weftInProgress with the handle; calls
// before it is ready are refused; weftCommGetAsyncError turns weftSuccess; then
// the communicator works. The last rank joins 1 s late, so the others are surely
// still initializing when they try a call.
int test_nonblocking_init() {
  int rank = std::atoi(std::getenv("WEFT_RANK") ? std::getenv("WEFT_RANK") : "-1");
  int n = std::atoi(std::getenv("WEFT_NRANKS") ? std::getenv("WEFT_NRANKS") : "0");
  g_rank = rank;
  if (rank == n - 1) std::this_thread::sleep_for(std::chrono::seconds(1));
  weftConfig_t cfg = WEFT_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  weftComm_t comm = nullptr;
  weftResult_t rc = weftCommInitFromEnv(&comm, &cfg);
  if (rc != weftInProgress || comm == nullptr) {
    fail(std::string("init returned ") + weftGetErrorString(rc) + " with handle " + (comm ? "set" : "NULL"));
    return 1;
  }
  int x = rank + 1;
  if (rank != n - 1) {
    rc = weftAllReduce(&x, &x, 1, weftInt32, weftSum, comm, nullptr);
    std::string why = weftGetLastError(nullptr);
    if (rc != weftInvalidUsage || why.find("still initializing") == std::string::npos)
      fail(std::string("a call during init returned ") + weftGetErrorString(rc) + ": " + why);
  }
  weftResult_t state = weftInProgress;
  auto t0 = std::chrono::steady_clock::now();
  while (state == weftInProgress && seconds_since(t0) < 30) {
    ok(weftCommGetAsyncError(comm, &state), comm, "get async error");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (state != weftSuccess) fail(std::string("init ended with ") + weftGetErrorString(state));
  else if (ok(weftAllReduce(&x, &x, 1, weftInt32, weftSum, comm, nullptr), comm, "all-reduce") &&
           x != n * (n + 1) / 2)
    fail("all-reduce gave " + std::to_string(x));
  ok(weftCommDestroy(comm), comm, "destroy");
  std::printf("rank %d: non-blocking init ready after %.2f s\n", rank, seconds_since(t0));
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "settings-mismatch") return test_settings_mismatch();
  if (mode == "nonblocking-init") return test_nonblocking_init();
  if (mode == "initall") {
    test_initall();
  } else {
    std::string state_path;
    if (mode == "tuning-state") {
      // One file per job (weft-run's secret), fresh.
      const char* secret = std::getenv("WEFT_JOB_SECRET");
      state_path = std::string("/tmp/weft-tune-state-") + (secret ? std::string(secret).substr(0, 12) : "x");
      setenv("WEFT_TUNE_STATE_FILE", state_path.c_str(), 1);
      if (std::getenv("WEFT_RANK") != nullptr && std::atoi(std::getenv("WEFT_RANK")) == 0) std::remove(state_path.c_str());
    }
    weftComm_t world = nullptr;
    if (weftCommInitFromEnv(&world, nullptr) != weftSuccess) {
      std::fprintf(stderr, "init: %s\n", weftGetLastError(nullptr));
      return 1;
    }
    int n = 0;
    weftCommUserRank(world, &g_rank);
    weftCommCount(world, &n);
    if (mode == "split") test_split(world, n, g_rank);
    else if (mode == "pipeline") test_pipeline(world, n, g_rank);
    else if (mode == "threads") test_threads(world, n, g_rank);
    else if (mode == "abort") test_abort(world, n, g_rank);
    else if (mode == "footprint") test_footprint(world, n, g_rank, argc > 2 ? std::atoi(argv[2]) : 4);
    else if (mode == "tuning-state") test_tuning_state(world, g_rank, state_path);
    else if (mode == "churn") test_churn(world, g_rank, argc > 2 ? std::atoi(argv[2]) : 500);
    else if (mode == "abort-sibling") test_abort_sibling(world, n, g_rank);
    else if (mode == "revoke") test_revoke(world, n, g_rank);
    else if (mode == "windows") test_windows(world, n, g_rank);
    else if (mode == "any-source") test_any_source(world, n, g_rank);
    else {
      std::fprintf(stderr, "usage: %s split|pipeline|threads|abort|churn [N]|footprint [N]|abort-sibling|any-source|initall|settings-mismatch|nonblocking-init|tuning-state\n", argv[0]);
      return 2;
    }
    if (mode != "abort") weftCommDestroy(world);
  }
  return g_failures == 0 ? 0 : 1;
}
