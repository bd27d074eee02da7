// Multi-process correctness of every collective other than the all-reduce sweep,
// run under weft-run with whatever WEFT_ALGO the test sets: broadcast and reduce
// from every root, all-gather, reduce-scatter, all-to-all, point-to-point groups,
// pre-multiplied sum, the non-blocking forms and barrier; in place and out of
// place where the collective has both; every element checked on every rank
// against exact expectations (exact_values.h).
//
//   weft-check-collectives [--counts 0,1,7,1023] [--dtypes all|...] [--ops all|...]
//                          [--expect-algo coll=NAME[,coll=NAME...]]
//
// --expect-algo: before every call of a listed collective (allreduce, broadcast,
// reduce, allgather, reducescatter, alltoall), weftCommGetAlgorithm must report
// NAME for the call's shape (the test forces it with WEFT_ALGO), so a forced
// algorithm that silently did not apply fails the run.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "call_log.h"
#include "exact_values.h"

namespace {
using namespace weft_test;

struct Checker : CallLog {
  int64_t checked_algo = 0;
  std::map<std::string, std::string> expect;  // collective -> algorithm it must run

  // Fails the run when a forced algorithm is not what this call shape runs.
  void expect_algo(const char* coll, size_t count, weftDataType_t dt, int root) {
    auto it = expect.find(coll);
    if (it == expect.end()) return;
    const char* name = nullptr;
    if (weftCommGetAlgorithm(comm, coll, count, dt, root, &name, nullptr) != weftSuccess) {
      std::fprintf(stderr, "rank %d: weftCommGetAlgorithm(%s) failed: %s\n", rank, coll, weftGetLastError(comm));
      ++failures;
      return;
    }
    ++checked_algo;
    if (it->second != name) {
      std::fprintf(stderr, "rank %d: %s count %zu root %d runs %s, not the forced %s\n", rank, coll, count, root,
                   name, it->second.c_str());
      ++failures;
    }
  }

  // Compares `count` elements of `buf` with want(i).
  void check(const std::string& what, const void* buf, size_t count, int type,
             const std::function<void(size_t, void*)>& want) {
    size_t es = kTypeSize[type];
    unsigned char w[8];
    int64_t bad = 0;
    for (size_t i = 0; i < count; ++i) {
      want(i, w);
      if (std::memcmp(static_cast<const unsigned char*>(buf) + i * es, w, es) != 0) {
        if (bad < 3) std::fprintf(stderr, "rank %d: %s: element %zu wrong\n", rank, what.c_str(), i);
        ++bad;
      }
    }
    wrong += bad;
  }
};

void fill(void* buf, int type, int op, int r, size_t first, size_t count) {
  for (size_t i = 0; i < count; ++i)
    store(buf, type, i, static_cast<double>(input_for(type, op, r, first + i)));
}

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

int index_of(const char* const* names, int k, const std::string& s) {
  for (int i = 0; i < k; ++i)
    if (s == names[i]) return i;
  std::fprintf(stderr, "unknown name %s\n", s.c_str());
  std::exit(2);
}

void run_type(Checker& c, int type, size_t count, const std::vector<int>& ops) {
  const int n = c.n, me = c.rank;
  const size_t es = kTypeSize[type];
  const auto dt = static_cast<weftDataType_t>(type);
  std::vector<unsigned char> a((n * count + 1) * es), b((n * count + 1) * es);
  const std::string tag = std::string(kTypeNames[type]) + " count " + std::to_string(count);

  for (int in_place = 0; in_place < 2; ++in_place) {
    const std::string how = in_place ? " in-place" : " out-of-place";
    for (int root = 0; root < n; ++root) {
      // Broadcast: the root's input reaches everyone.
      void* recv = b.data();
      void* send = in_place ? recv : a.data();
      std::memset(recv, 0x5A, count * es);
      if (me == root) fill(send, type, weftSum, root, 0, count);
      c.expect_algo("broadcast", count, dt, root);
      if (c.ok(weftBroadcast(send, recv, count, dt, root, c.comm, nullptr), "broadcast " + tag))
        c.check("broadcast root " + std::to_string(root) + " " + tag + how, recv, count, type,
                [&](size_t i, void* w) { store(w, type, 0, static_cast<double>(input_for(type, weftSum, root, i))); });
      // Reduce: the root gets every op's result.
      for (int op : ops) {
        fill(send, type, op, me, 0, count);
        c.expect_algo("reduce", count, dt, root);
        if (c.ok(weftReduce(send, recv, count, dt, static_cast<weftRedOp_t>(op), root, c.comm, nullptr),
                 "reduce " + tag) && me == root)
          c.check("reduce " + std::string(kOpNames[op]) + " root " + std::to_string(root) + " " + tag + how,
                  recv, count, type, [&](size_t i, void* w) { expected(type, op, n, i, w); });
      }
    }
    // All-gather: block r of the result is rank r's input.
    {
      void* recv = b.data();
      void* send = in_place ? b.data() + me * count * es : a.data();
      fill(send, type, weftSum, me, 0, count);
      c.expect_algo("allgather", count, dt, 0);
      if (c.ok(weftAllGather(send, recv, count, dt, c.comm, nullptr), "allgather " + tag))
        c.check("allgather " + tag + how, recv, n * count, type, [&](size_t g, void* w) {
          store(w, type, 0, static_cast<double>(input_for(type, weftSum, static_cast<int>(g / count), g % count)));
        });
    }
    // Reduce-scatter: rank r gets block r of the reduction of everyone's n blocks.
    for (int op : ops) {
      void* send = a.data();
      void* recv = in_place ? a.data() + me * count * es : b.data();
      fill(send, type, op, me, 0, n * count);
      c.expect_algo("reducescatter", count, dt, 0);
      if (c.ok(weftReduceScatter(send, recv, count, dt, static_cast<weftRedOp_t>(op), c.comm, nullptr),
               "reducescatter " + tag))
        c.check("reducescatter " + std::string(kOpNames[op]) + " " + tag + how, recv, count, type,
                [&](size_t i, void* w) { expected(type, op, n, me * count + i, w); });
    }
  }
  // All-to-all (out of place only): block p of my result is block `me` of rank p's input.
  fill(a.data(), type, weftSum, me, 0, n * count);
  c.expect_algo("alltoall", count, dt, 0);
  if (c.ok(weftAlltoAll(a.data(), b.data(), count, dt, c.comm, nullptr), "alltoall " + tag))
    c.check("alltoall " + tag, b.data(), n * count, type, [&](size_t g, void* w) {
      int p = static_cast<int>(g / count);
      store(w, type, 0, static_cast<double>(input_for(type, weftSum, p, me * count + g % count)));
    });
}

void run_p2p(Checker& c, size_t count) {
  const int n = c.n, me = c.rank;
  if (n < 2) return;
  // Ring shift in one group: send to the right, receive from the left.
  std::vector<int32_t> out(count), in(count, -1);
  for (size_t i = 0; i < count; ++i) out[i] = me * 1000003 + static_cast<int32_t>(i);
  int right = (me + 1) % n, left = (me + n - 1) % n;
  weftGroupStart();
  weftRecv(in.data(), count, weftInt32, left, c.comm, nullptr);  // posted before the send on purpose
  weftSend(out.data(), count, weftInt32, right, c.comm, nullptr);
  if (c.ok(weftGroupEnd(), "group send/recv count " + std::to_string(count)))
    c.check("ring shift count " + std::to_string(count), in.data(), count, weftInt32,
            [&](size_t i, void* w) { int32_t v = left * 1000003 + static_cast<int32_t>(i); std::memcpy(w, &v, 4); });
  // Everyone with everyone in one group.
  std::vector<std::vector<int32_t>> from(static_cast<size_t>(n), std::vector<int32_t>(count, -1));
  weftGroupStart();
  for (int p = 0; p < n; ++p)
    if (p != me) weftRecv(from[p].data(), count, weftInt32, p, c.comm, nullptr);
  for (int p = 0; p < n; ++p)
    if (p != me) weftSend(out.data(), count, weftInt32, p, c.comm, nullptr);
  if (c.ok(weftGroupEnd(), "all-pairs group count " + std::to_string(count)))
    for (int p = 0; p < n; ++p)
      if (p != me)
        c.check("all-pairs from " + std::to_string(p), from[p].data(), count, weftInt32,
                [&](size_t i, void* w) { int32_t v = p * 1000003 + static_cast<int32_t>(i); std::memcpy(w, &v, 4); });
}

void run_premul_and_async(Checker& c, int type, size_t count) {
  const int n = c.n, me = c.rank;
  const size_t es = kTypeSize[type];
  const auto dt = static_cast<weftDataType_t>(type);
  std::vector<unsigned char> buf(count * es + 8), scalar(8);
  store(scalar.data(), type, 0, 1.0 + me % 2);
  weftRedOp_t op;
  if (!c.ok(weftRedOpCreatePreMulSum(&op, scalar.data(), dt, weftScalarHostImmediate, c.comm), "premulsum create"))
    return;
  fill(buf.data(), type, weftSum, me, 0, count);
  c.expect_algo("allreduce", count, dt, 0);
  if (c.ok(weftAllReduce(buf.data(), buf.data(), count, dt, op, c.comm, nullptr), "premulsum allreduce"))
    c.check(std::string("premulsum ") + kTypeNames[type], buf.data(), count, type, [&](size_t i, void* w) {
      int64_t s = 0;
      for (int r = 0; r < n; ++r) s += (1 + r % 2) * input_for(type, weftSum, r, i);
      store(w, type, 0, static_cast<double>(s));
    });
  c.ok(weftRedOpDestroy(op, c.comm), "premulsum destroy");
  // Non-blocking: two all-reduces and a broadcast in flight, completed in order.
  std::vector<unsigned char> x(count * es + 8), y(count * es + 8), z(count * es + 8);
  fill(x.data(), type, weftSum, me, 0, count);
  fill(y.data(), type, weftMax, me, 0, count);
  if (me == 0) fill(z.data(), type, weftSum, 0, 0, count);
  c.expect_algo("allreduce", count, dt, 0);
  c.expect_algo("broadcast", count, dt, 0);
  weftRequest_t r1, r2, r3;
  bool posted = c.ok(weftAllReduceAsync(x.data(), x.data(), count, dt, weftSum, c.comm, &r1), "async sum") &
                c.ok(weftAllReduceAsync(y.data(), y.data(), count, dt, weftMax, c.comm, &r2), "async max") &
                c.ok(weftBroadcastAsync(z.data(), z.data(), count, dt, 0, c.comm, &r3), "async bcast");
  if (!posted) return;
  int done = 0;
  weftResult_t tested = weftTest(&r3, &done);
  // Pending: weftInProgress with done = 0; complete: the result, done = 1 and the handle nulled.
  if (tested == weftInProgress) c.ok(done == 0 && r3 != nullptr ? weftSuccess : weftInternalError, "test pending");
  else c.ok(done == 1 && r3 == nullptr ? tested : weftInternalError, "test done");
  c.ok(weftWait(&r3), "wait bcast");
  c.ok(weftWait(&r1), "wait sum");
  c.ok(weftWait(&r2), "wait max");
  // Freed handles are NULL: waiting or testing again is a no-op, not a double free.
  c.ok(r1 == nullptr && r2 == nullptr && r3 == nullptr ? weftWait(&r1) : weftInternalError, "handles nulled");
  done = 0;
  c.ok(weftTest(&r2, &done) == weftSuccess && done == 1 ? weftSuccess : weftInternalError, "test of a freed handle");
  c.check("async sum", x.data(), count, type, [&](size_t i, void* w) { expected(type, weftSum, n, i, w); });
  c.check("async max", y.data(), count, type, [&](size_t i, void* w) { expected(type, weftMax, n, i, w); });
  c.check("async bcast", z.data(), count, type,
          [&](size_t i, void* w) { store(w, type, 0, static_cast<double>(input_for(type, weftSum, 0, i))); });
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> counts = {"0", "1", "7", "1023"};
  std::vector<std::string> dtypes(kTypeNames, kTypeNames + 10), opnames(kOpNames, kOpNames + 5);
  std::map<std::string, std::string> expect;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--counts" && i + 1 < argc) counts = split(argv[++i]);
    else if (a == "--dtypes" && i + 1 < argc) { std::string v = argv[++i]; if (v != "all") dtypes = split(v); }
    else if (a == "--ops" && i + 1 < argc) { std::string v = argv[++i]; if (v != "all") opnames = split(v); }
    else if (a == "--expect-algo" && i + 1 < argc) {
      for (const std::string& kv : split(argv[++i])) {
        size_t eq = kv.find('=');
        std::string coll = kv.substr(0, eq);
        static const char* const kColls[] = {"allreduce", "broadcast", "reduce", "allgather", "reducescatter",
                                             "alltoall"};
        bool known = false;
        for (const char* k : kColls) known = known || coll == k;
        if (eq == std::string::npos || eq + 1 == kv.size() || !known) {
          std::fprintf(stderr, "--expect-algo takes coll=NAME[,coll=NAME...], coll one of allreduce, broadcast, "
                               "reduce, allgather, reducescatter, alltoall; not '%s'\n", kv.c_str());
          return 2;
        }
        expect[coll] = kv.substr(eq + 1);
      }
    } else {
      std::fprintf(stderr, "usage: %s [--counts a,b] [--dtypes ...] [--ops ...] [--expect-algo coll=NAME,...]\n",
                   argv[0]);
      return 2;
    }
  }
  Checker c;
  c.expect = expect;
  if (weftCommInitFromEnv(&c.comm, nullptr) != weftSuccess) {
    std::fprintf(stderr, "init failed: %s\n", weftGetLastError(nullptr));
    return 1;
  }
  weftCommUserRank(c.comm, &c.rank);
  weftCommCount(c.comm, &c.n);
  if (c.n > kMaxRanks) {
    std::fprintf(stderr, "the exact test values cover at most %d ranks, not %d\n", kMaxRanks, c.n);
    return 2;
  }
  std::vector<int> ops;
  for (const auto& o : opnames) ops.push_back(index_of(kOpNames, 5, o));
  for (const auto& cs : counts) {
    size_t count = std::strtoull(cs.c_str(), nullptr, 0);
    for (const auto& d : dtypes) run_type(c, index_of(kTypeNames, 10, d), count, ops);
    run_p2p(c, count);
    for (int t : {weftFloat32, weftFloat16, weftInt32, weftBfloat16}) run_premul_and_async(c, t, count);
    c.ok(weftBarrier(c.comm), "barrier");
  }
  std::string algo_note;
  for (const auto& [coll, name] : c.expect) algo_note += (algo_note.empty() ? ", forced " : ", ") + coll + "=" + name;
  if (!c.expect.empty()) algo_note += ": " + std::to_string(c.checked_algo) + " call shapes checked";
  std::printf("rank %d/%d: %" PRId64 " calls, %" PRId64 " wrong elements, %" PRId64 " failed calls%s\n",
              c.rank, c.n, c.calls, c.wrong, c.failures, algo_note.c_str());
  weftCommDestroy(c.comm);
  return c.wrong == 0 && c.failures == 0 ? 0 : 1;
}
