// Multi-process correctness of every collective other than the all-reduce sweep,
// run under weft-run with whatever WEFT_ALGO the test sets: broadcast and reduce
// from every root, all-gather, reduce-scatter, all-to-all, point-to-point groups,
// pre-multiplied sum, the non-blocking forms and barrier; in place and out of
// place where the collective has both; every element checked on every rank
// against exact expectations (exact_values.h).
//
//   weft-check-collectives [--counts 0,1,7,1023] [--dtypes all|...] [--ops all|...]
//                          [--expect-algo coll=NAME[,coll=NAME...]]
//                          [--device DRIVER [--windows] [--graph captured|refused]]
//
// --device: the collectives (and an all-reduce per op) run on device copies of
// the buffers, enqueued on a CUDA stream, through DRIVER: libcuda.so.1 on a GPU
// machine, or the stand-in driver, with which the stream rules are checked too
// (the call returns before the stream has run; misuse is refused; a failed copy
// fails the communicator). The point-to-point groups, gather, scatter and
// all-to-all-v run on device memory too; pre-multiplied sums and the
// non-blocking forms stay on host memory.
//
// --windows (with --device): the device twins are registered as symmetric
// windows (weftCommWindowRegister, WEFT_WIN_COLL_SYMMETRIC) for as long as a
// test runs, so that the collectives over cuda_p2p read the peers' windows in place.
//
// --graph (with --device): collectives captured into a CUDA graph and replayed
// (captured: over cuda_p2p), or refused during capture (refused: staged).
//
// --expect-algo: before every call of a listed collective (allreduce, broadcast,
// reduce, allgather, reducescatter, alltoall), weftCommGetAlgorithm must report
// NAME for the call's shape (the test forces it with WEFT_ALGO), so a forced
// algorithm that silently did not apply fails the run.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "call_log.h"
#include "common/device_memory.h"
#include "exact_values.h"

namespace {
using namespace weft_test;
using weft_tools::DeviceMemory;

struct Checker : CallLog {
  int64_t checked_algo = 0;
  DeviceMemory* device = nullptr;  // --device
  void* dev_a = nullptr;           // device twins of the host buffers a and b (--device)
  void* dev_b = nullptr;
  bool windows = false;            // --windows

  // Runs call(at, stream) on the host buffers a and b (`bytes` each), where at(p)
  // is where a host pointer into them lives for the call: itself (stream NULL),
  // or with --device the same place in their device twins, filled before the
  // call and copied back after it on the call's stream.
  template <class Call>
  weftResult_t run(unsigned char* a, unsigned char* b, size_t bytes, Call call) {
    if (device == nullptr) return call([](void* p) { return p; }, nullptr);
    auto at = [&](void* p) -> void* {
      auto* q = static_cast<unsigned char*>(p);
      if (q >= a && q <= a + bytes) return static_cast<unsigned char*>(dev_a) + (q - a);
      if (q >= b && q <= b + bytes) return static_cast<unsigned char*>(dev_b) + (q - b);
      return p;
    };
    if (!device->copy(dev_a, a, bytes) || !device->copy(dev_b, b, bytes)) return weftUnhandledCudaError;
    weftResult_t rc = call(at, device->stream());
    bool back = device->copy(a, dev_a, bytes) && device->copy(b, dev_b, bytes);
    back = device->synchronize() && back;
    return rc != weftSuccess ? rc : back ? weftSuccess : weftUnhandledCudaError;
  }
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

// --device: the device twins of a test's two host buffers, for as long as it runs.
// With --windows each is a symmetric window: it starts at the first multiple of
// WEFT_WIN_REQUIRED_ALIGNMENT of its allocation, and every rank's is as large.
struct Twins {
  Checker& c;
  bool ok = true;
  void* raw[2] = {nullptr, nullptr};
  weftWindow_t win[2] = {nullptr, nullptr};
  Twins(Checker& checker, size_t bytes) : c(checker) {
    if (c.device == nullptr) return;
    constexpr size_t kAlign = WEFT_WIN_REQUIRED_ALIGNMENT;
    const size_t size = std::max<size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    void** twin[2] = {&c.dev_a, &c.dev_b};
    for (int i = 0; i < 2; ++i) {
      *twin[i] = c.windows ? c.device->alloc_aligned(size, kAlign, &raw[i]) : (raw[i] = c.device->alloc(bytes));
      ok = ok && *twin[i] != nullptr;
    }
    if (!ok) c.ok(weftUnhandledCudaError, "device buffers of " + std::to_string(bytes) + " bytes");
    // Every rank registers, the failed ones too (a NULL buffer): the call is collective.
    for (int i = 0; i < 2 && c.windows; ++i)
      if (!c.ok(weftCommWindowRegister(c.comm, ok ? *twin[i] : nullptr, size, &win[i], WEFT_WIN_COLL_SYMMETRIC),
                "weftCommWindowRegister of a device twin"))
        win[i] = nullptr;
  }
  ~Twins() {
    if (c.device == nullptr) return;
    for (int i = 0; i < 2; ++i)
      if (win[i] != nullptr) c.ok(weftCommWindowDeregister(c.comm, win[i]), "weftCommWindowDeregister of a device twin");
    for (void* p : raw)
      if (p != nullptr) c.device->release(p);
    c.dev_a = c.dev_b = nullptr;
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
  const size_t bytes = (n * count + 1) * es;
  std::vector<unsigned char> a(bytes), b(bytes);
  const std::string tag = std::string(kTypeNames[type]) + " count " + std::to_string(count);
  Twins twins(c, bytes);
  if (!twins.ok) return;

  for (int in_place = 0; in_place < 2; ++in_place) {
    const std::string how = in_place ? " in-place" : " out-of-place";
    for (int root = 0; root < n; ++root) {
      // Broadcast: the root's input reaches everyone.
      void* recv = b.data();
      void* send = in_place ? recv : a.data();
      std::memset(recv, 0x5A, count * es);
      if (me == root) fill(send, type, weftSum, root, 0, count);
      c.expect_algo("broadcast", count, dt, root);
      if (c.ok(c.run(a.data(), b.data(), bytes, [&](auto at, void* s) {
            return weftBroadcast(at(send), at(recv), count, dt, root, c.comm, s);
          }), "broadcast " + tag))
        c.check("broadcast root " + std::to_string(root) + " " + tag + how, recv, count, type,
                [&](size_t i, void* w) { store(w, type, 0, static_cast<double>(input_for(type, weftSum, root, i))); });
      // Reduce: the root gets every op's result.
      for (int op : ops) {
        fill(send, type, op, me, 0, count);
        c.expect_algo("reduce", count, dt, root);
        if (c.ok(c.run(a.data(), b.data(), bytes, [&](auto at, void* s) {
              return weftReduce(at(send), at(recv), count, dt, static_cast<weftRedOp_t>(op), root, c.comm, s);
            }), "reduce " + tag) && me == root)
          c.check("reduce " + std::string(kOpNames[op]) + " root " + std::to_string(root) + " " + tag + how,
                  recv, count, type, [&](size_t i, void* w) { expected(type, op, n, i, w); });
      }
    }
    // All-reduce, on device memory only (weft-check-allreduce sweeps it on host memory).
    for (int op : c.device != nullptr ? ops : std::vector<int>{}) {
      void* send = a.data();
      void* recv = in_place ? a.data() : b.data();
      fill(send, type, op, me, 0, count);
      if (c.ok(c.run(a.data(), b.data(), bytes, [&](auto at, void* s) {
            return weftAllReduce(at(send), at(recv), count, dt, static_cast<weftRedOp_t>(op), c.comm, s);
          }), "allreduce " + tag))
        c.check("allreduce " + std::string(kOpNames[op]) + " " + tag + how, recv, count, type,
                [&](size_t i, void* w) { expected(type, op, n, i, w); });
    }
    // All-gather: block r of the result is rank r's input.
    {
      void* recv = b.data();
      void* send = in_place ? b.data() + me * count * es : a.data();
      fill(send, type, weftSum, me, 0, count);
      c.expect_algo("allgather", count, dt, 0);
      if (c.ok(c.run(a.data(), b.data(), bytes, [&](auto at, void* s) {
            return weftAllGather(at(send), at(recv), count, dt, c.comm, s);
          }), "allgather " + tag))
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
      if (c.ok(c.run(a.data(), b.data(), bytes, [&](auto at, void* s) {
            return weftReduceScatter(at(send), at(recv), count, dt, static_cast<weftRedOp_t>(op), c.comm, s);
          }), "reducescatter " + tag))
        c.check("reducescatter " + std::string(kOpNames[op]) + " " + tag + how, recv, count, type,
                [&](size_t i, void* w) { expected(type, op, n, me * count + i, w); });
    }
  }
  // All-to-all (out of place only): block p of my result is block `me` of rank p's input.
  fill(a.data(), type, weftSum, me, 0, n * count);
  c.expect_algo("alltoall", count, dt, 0);
  if (c.ok(c.run(a.data(), b.data(), bytes, [&](auto at, void* s) {
        return weftAlltoAll(at(a.data()), at(b.data()), count, dt, c.comm, s);
      }), "alltoall " + tag))
    c.check("alltoall " + tag, b.data(), n * count, type, [&](size_t g, void* w) {
      int p = static_cast<int>(g / count);
      store(w, type, 0, static_cast<double>(input_for(type, weftSum, p, me * count + g % count)));
    });
}

void run_p2p(Checker& c, size_t count) {
  const int n = c.n, me = c.rank;
  const size_t bytes = (n * count + 1) * sizeof(int32_t);
  std::vector<unsigned char> a(bytes), b(bytes);
  Twins twins(c, bytes);
  if (!twins.ok) return;
  auto* out = reinterpret_cast<int32_t*>(a.data());
  auto* in = reinterpret_cast<int32_t*>(b.data());
  auto v = [](int r, size_t i) { return r * 1000003 + static_cast<int32_t>(i); };
  auto want = [&](int r, size_t first) {
    return [=](size_t i, void* w) { int32_t x = r * 1000003 + static_cast<int32_t>(first + i); std::memcpy(w, &x, 4); };
  };
  const std::string tag = " count " + std::to_string(count);
  for (size_t i = 0; i < n * count; ++i) out[i] = v(me, i);
  if (n >= 2) {
    // Ring shift in one group: send to the right, receive from the left.
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    std::fill(in, in + count, -1);
    if (c.ok(c.run(a.data(), b.data(), bytes, [&](auto at, void* st) {
          weftGroupStart();
          weftRecv(at(in), count, weftInt32, left, c.comm, st);  // posted before the send on purpose
          weftSend(at(out), count, weftInt32, right, c.comm, st);
          return weftGroupEnd();
        }), "group send/recv" + tag))
      c.check("ring shift" + tag, in, count, weftInt32, want(left, 0));
    // Three messages to one peer in one group (halves, thirds, the rest),
    // received in order: together they are the first `count` elements.
    const size_t s1 = count / 2, s2 = count / 3, s3 = count - s1 - s2;
    std::fill(in, in + count, -1);
    if (c.ok(c.run(a.data(), b.data(), bytes, [&](auto at, void* st) {
          weftGroupStart();
          weftSend(at(out), s1, weftInt32, right, c.comm, st);
          weftRecv(at(in), s1, weftInt32, left, c.comm, st);
          weftSend(at(out + s1), s2, weftInt32, right, c.comm, st);
          weftSend(at(out + s1 + s2), s3, weftInt32, right, c.comm, st);
          weftRecv(at(in + s1), s2, weftInt32, left, c.comm, st);
          weftRecv(at(in + s1 + s2), s3, weftInt32, left, c.comm, st);
          return weftGroupEnd();
        }), "three messages to one peer" + tag))
      c.check("three messages from the left" + tag, in, count, weftInt32, want(left, 0));
    // Everyone with everyone in one group: block p from rank p.
    std::fill(in, in + n * count, -1);
    if (c.ok(c.run(a.data(), b.data(), bytes, [&](auto at, void* st) {
          weftGroupStart();
          for (int p = 0; p < n; ++p)
            if (p != me) weftRecv(at(in + p * count), count, weftInt32, p, c.comm, st);
          for (int p = 0; p < n; ++p)
            if (p != me) weftSend(at(out), count, weftInt32, p, c.comm, st);
          return weftGroupEnd();
        }), "all-pairs group" + tag))
      for (int p = 0; p < n; ++p)
        if (p != me) c.check("all-pairs from " + std::to_string(p) + tag, in + p * count, count, weftInt32, want(p, 0));
  }
  // Gather to the last rank: block p of its result is rank p's input.
  const int root = n - 1;
  std::fill(in, in + n * count, -1);
  if (c.ok(c.run(a.data(), b.data(), bytes, [&](auto at, void* st) {
        return weftGather(at(out), at(in), count, weftInt32, root, c.comm, st);
      }), "gather" + tag) && me == root)
    for (int p = 0; p < n; ++p) c.check("gather block " + std::to_string(p) + tag, in + p * count, count, weftInt32, want(p, 0));
  // Scatter from rank 0: rank p gets block p of rank 0's input.
  std::fill(in, in + count, -1);
  if (c.ok(c.run(a.data(), b.data(), bytes, [&](auto at, void* st) {
        return weftScatter(at(out), at(in), count, weftInt32, 0, c.comm, st);
      }), "scatter" + tag))
    c.check("scatter" + tag, in, count, weftInt32, want(0, static_cast<size_t>(me) * count));
  // All-to-all-v with equal parts: block p of the result is block `me` of rank p's input.
  std::vector<size_t> counts(static_cast<size_t>(n), count), displs(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) displs[static_cast<size_t>(p)] = static_cast<size_t>(p) * count;
  std::fill(in, in + n * count, -1);
  if (c.ok(c.run(a.data(), b.data(), bytes, [&](auto at, void* st) {
        return weftAlltoAllv(at(out), counts.data(), displs.data(), at(in), counts.data(), displs.data(), weftInt32,
                             c.comm, st);
      }), "alltoallv" + tag))
    for (int p = 0; p < n; ++p)
      c.check("alltoallv block " + std::to_string(p) + tag, in + p * count, count, weftInt32,
              want(p, static_cast<size_t>(me) * count));
}

// weftScalarDevice: the scalar is read as each call runs (NCCL's semantics), so
// one op serves two all-reduces with the scalar changed in between. With
// --device the scalar is in device memory, changed on the calls' stream, and the
// all-reduces take device buffers; a call on host buffers is refused.
void run_premul_scalar_device(Checker& c, int type, size_t count) {
  const int n = c.n, me = c.rank;
  const size_t es = kTypeSize[type], bytes = count * es + 8;
  const auto dt = static_cast<weftDataType_t>(type);
  std::vector<unsigned char> a(bytes), b(bytes), host_scalar(8);
  void* scalar = c.device != nullptr ? c.device->alloc(8) : host_scalar.data();
  if (scalar == nullptr) {
    c.ok(weftUnhandledCudaError, "a device scalar");
    return;
  }
  auto factor = [](int r, int round) { return 1 + (r + round) % 2; };
  weftRedOp_t op;
  if (c.ok(weftRedOpCreatePreMulSum(&op, scalar, dt, weftScalarDevice, c.comm), "premulsum create (scalar device)")) {
    Twins twins(c, bytes);
    for (int round = 0; round < 2 && twins.ok; ++round) {
      unsigned char v[8];
      store(v, type, 0, factor(me, round));
      if (c.device != nullptr ? !c.device->copy(scalar, v, es) : (std::memcpy(scalar, v, es), false))
        c.ok(weftUnhandledCudaError, "setting the device scalar");
      fill(a.data(), type, weftSum, me, 0, count);
      const std::string what = std::string("premulsum scalar device round ") + std::to_string(round) + " " +
                               kTypeNames[type];
      if (c.ok(c.run(a.data(), b.data(), bytes, [&](auto at, void* st) {
            return weftAllReduce(at(a.data()), at(a.data()), count, dt, op, c.comm, st);
          }), what))
        c.check(what, a.data(), count, type, [&](size_t i, void* w) {
          int64_t s = 0;
          for (int r = 0; r < n; ++r) s += factor(r, round) * input_for(type, weftSum, r, i);
          store(w, type, 0, static_cast<double>(s));
        });
    }
    if (c.device != nullptr && weftAllReduce(a.data(), a.data(), count, dt, op, c.comm, nullptr) != weftInvalidArgument)
      c.ok(weftInternalError, "a host-buffer call with a device scalar was not refused");
    c.ok(weftRedOpDestroy(op, c.comm), "premulsum destroy (scalar device)");
  }
  if (c.device != nullptr) c.device->release(scalar);
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

// --device with the stand-in driver, whose "device memory" the test can read
// while the stream is held: the call returns before its stream has run it, and
// the misuses are refused with what the user must change.
void run_device_rules(Checker& c) {
  DeviceMemory& d = *c.device;
  const int n = c.n, me = c.rank;
  constexpr size_t kCount = 4099;
  const size_t bytes = kCount * sizeof(float);
  std::vector<float> in(kCount), out(kCount), sentinel(kCount, -7.0f);
  for (size_t i = 0; i < kCount; ++i) store(in.data(), weftFloat32, i, static_cast<double>(input_for(weftFloat32, weftSum, me, i)));
  auto* dev = static_cast<float*>(d.alloc(bytes));
  auto* res = static_cast<float*>(d.alloc(bytes));
  if (dev == nullptr || res == nullptr || !d.copy(dev, in.data(), bytes) || !d.copy(res, sentinel.data(), bytes) ||
      !d.synchronize()) {
    c.ok(weftUnhandledCudaError, "device buffers for the stream rules");
    return;
  }
  int cu_device = -2;
  c.ok(weftCommCuDevice(c.comm, &cu_device), "weftCommCuDevice");
  if (cu_device != d.device()) c.ok(weftInternalError, "weftCommCuDevice is " + std::to_string(cu_device));

  d.hold(true);
  c.ok(weftAllReduce(dev, res, kCount, weftFloat32, weftSum, c.comm, d.stream()), "all-reduce on a held stream");
  const bool early = std::memcmp(res, sentinel.data(), bytes) != 0;
  d.hold(false);
  if (early) c.ok(weftInternalError, "the all-reduce's result was there before its stream ran");
  if (d.copy(out.data(), res, bytes) && d.synchronize())
    c.check("all-reduce enqueued on a held stream", out.data(), kCount, weftFloat32,
            [&](size_t i, void* w) { expected(weftFloat32, weftSum, n, i, w); });

  auto refused = [&](weftResult_t rc, weftResult_t want, const char* says, const std::string& what) {
    std::string why = weftGetLastError(c.comm);
    if (rc != want || why.find(says) == std::string::npos)
      c.ok(weftInternalError, what + " returned " + weftGetErrorString(rc) + ": " + why);
  };
  refused(weftAllReduce(in.data(), in.data(), kCount, weftFloat32, weftSum, c.comm, d.stream()), weftInvalidArgument,
          "is host memory, but the call has a stream", "host buffers with a stream");
  // Stream NULL with device buffers: NCCL's stream 0, the legacy default stream.
  if (d.copy(res, sentinel.data(), bytes) && d.synchronize() &&
      c.ok(weftAllReduce(dev, res, kCount, weftFloat32, weftSum, c.comm, nullptr), "all-reduce on stream NULL") &&
      d.synchronize(nullptr) && d.copy(out.data(), res, bytes) && d.synchronize())
    c.check("all-reduce on the legacy default stream", out.data(), kCount, weftFloat32,
            [&](size_t i, void* w) { expected(weftFloat32, weftSum, n, i, w); });
  weftRequest_t req = nullptr;
  refused(weftBroadcastAsync(dev, dev, kCount, weftFloat32, 0, c.comm, &req), weftInvalidArgument,
          "is device memory", "a non-blocking broadcast of device memory");
  if (req != nullptr) c.ok(weftInternalError, "a refused non-blocking call handed out a request");
  refused(weftRecvAsync(dev, kCount, weftFloat32, (me + n - 1) % n, c.comm, &req), weftInvalidArgument,
          "is device memory", "a non-blocking receive into device memory");
  refused(weftAllReduce(dev, out.data(), kCount, weftFloat32, weftSum, c.comm, d.stream()), weftInvalidArgument,
          "recvbuff", "a host recvbuff beside a device sendbuff");
  // Send and receive buffers in two allocations that touch (an all-gather, which
  // goes in one piece): each is copied on its own, since the driver refuses a
  // copy across two allocations.
  const size_t each = static_cast<size_t>(n) * kCount;
  auto* pair = static_cast<float*>(d.alloc_touching_pair(each * sizeof(float)));
  std::vector<float> gathered(each);
  float* send = pair + each - kCount;  // the end of the first allocation
  if (pair != nullptr && d.copy(send, in.data(), bytes) && d.synchronize() &&
      c.ok(weftAllGather(send, pair + each, kCount, weftFloat32, c.comm, d.stream()),
           "all-gather between touching allocations") &&
      d.copy(gathered.data(), pair + each, each * sizeof(float)) && d.synchronize())
    c.check("all-gather between touching allocations", gathered.data(), each, weftFloat32, [&](size_t g, void* w) {
      store(w, weftFloat32, 0, static_cast<double>(input_for(weftFloat32, weftSum, static_cast<int>(g / kCount), g % kCount)));
    });
  // Collectives on a stream in a group run in their order: the all-reduce reads
  // dev before the broadcast overwrites it with rank 0's input.
  weftGroupStart();
  c.ok(weftAllReduce(dev, res, kCount, weftFloat32, weftSum, c.comm, d.stream()), "grouped all-reduce");
  c.ok(weftBroadcast(dev, dev, kCount, weftFloat32, 0, c.comm, d.stream()), "grouped broadcast");
  if (c.ok(weftGroupEnd(), "a group on a stream") && d.copy(out.data(), res, bytes) && d.synchronize())
    c.check("grouped all-reduce on a stream", out.data(), kCount, weftFloat32,
            [&](size_t i, void* w) { expected(weftFloat32, weftSum, n, i, w); });
  if (d.copy(out.data(), dev, bytes) && d.synchronize())
    c.check("grouped broadcast on a stream", out.data(), kCount, weftFloat32, [&](size_t i, void* w) {
      store(w, weftFloat32, 0, static_cast<double>(input_for(weftFloat32, weftSum, 0, i)));
    });
  // One group's point-to-point calls on host and device memory at once.
  weftGroupStart();
  c.ok(weftSend(in.data(), kCount, weftFloat32, (me + 1) % n, c.comm, nullptr), "grouped host send");
  c.ok(weftRecv(res, kCount, weftFloat32, (me + n - 1) % n, c.comm, d.stream()), "grouped device receive");
  refused(weftGroupEnd(), weftInvalidUsage, "mix host and device memory", "a group mixing host and device memory");
  d.release(dev);
  d.release(res);
}

// --graph captured|refused: device collectives enqueued while the stream is
// captured into a CUDA graph (global mode). captured (cuda_p2p): the graph of an
// out-of-place and an in-place all-reduce, an all-gather and a broadcast is
// replayed three times on new inputs, with an eager all-reduce after each
// replay, every element checked; refused (staged): the collective is refused
// naming why. Either way point-to-point on a capturing stream is refused, and
// so is a communicator's first device collective (it maps the peers' memory).
void run_device_graph(Checker& c, bool captured) {
  DeviceMemory& d = *c.device;
  const int n = c.n, me = c.rank;
  if (!d.can_capture()) {
    c.ok(weftInternalError, "the CUDA driver lacks the stream capture and graph entry points");
    return;
  }
  auto refused = [&](weftResult_t rc, weftComm_t comm, const char* says, const std::string& what) {
    std::string why = weftGetLastError(comm);
    if (rc != weftInvalidUsage || why.find(says) == std::string::npos)
      c.ok(weftInternalError, what + " returned " + weftGetErrorString(rc) + ": " + why);
  };
  auto end_empty_capture = [&] {
    if (void* g = d.end_capture()) d.destroy_graph(g);
  };
  weftComm_t fresh = nullptr;
  auto* small = static_cast<float*>(d.alloc(64 * sizeof(float)));
  if (small != nullptr && c.ok(weftCommSplit(c.comm, 0, me, &fresh, nullptr), "split for the capture") &&
      d.begin_capture()) {
    refused(weftAllReduce(small, small, 64, weftFloat32, weftSum, fresh, d.stream()), fresh,
            "before this communicator's first device collective", "a first device all-reduce during capture");
    if (n > 1) {
      weftGroupStart();
      weftSend(small, 64, weftFloat32, (me + 1) % n, c.comm, d.stream());
      weftRecv(small, 64, weftFloat32, (me + n - 1) % n, c.comm, d.stream());
      refused(weftGroupEnd(), c.comm, "captured into a CUDA graph", "send/recv during capture");
    }
    end_empty_capture();
  }
  if (fresh != nullptr) weftCommDestroy(fresh);

  constexpr size_t kCount = 20000;
  const size_t un = static_cast<size_t>(n);
  // a: the input, the broadcast's buffer, the in-place all-reduce's buffer;
  // b: the all-reduce's result, then the all-gather's; windows with --windows.
  const size_t elems = std::max<size_t>(3, un + 1) * kCount, bytes = elems * sizeof(float);
  std::vector<float> a(elems), b(elems), e(kCount);
  Twins twins(c, bytes);
  auto* eager = static_cast<float*>(d.alloc(kCount * sizeof(float)));
  if (!twins.ok || eager == nullptr) return;
  auto* da = static_cast<float*>(c.dev_a);
  auto* db = static_cast<float*>(c.dev_b);
  // The first device collective outside the capture (the warm-up).
  c.ok(weftAllReduce(da, db, kCount, weftFloat32, weftSum, c.comm, d.stream()), "the all-reduce before the capture");
  if (!d.synchronize() || !d.begin_capture()) return;
  const weftResult_t r1 = weftAllReduce(da, db, kCount, weftFloat32, weftSum, c.comm, d.stream());
  const std::string why = weftGetLastError(c.comm);
  const weftResult_t r2 = weftAllGather(da, db + kCount, kCount, weftFloat32, c.comm, d.stream());
  const weftResult_t r3 = weftBroadcast(da + kCount, da + kCount, kCount, weftFloat32, 0, c.comm, d.stream());
  const weftResult_t r4 = weftAllReduce(da + 2 * kCount, da + 2 * kCount, kCount, weftFloat32, weftSum, c.comm,
                                        d.stream());
  void* graph = d.end_capture();
  if (!captured) {
    if (r1 != weftInvalidUsage || why.find("only collectives over cuda_p2p can be captured") == std::string::npos)
      c.ok(weftInternalError, std::string("a staged all-reduce during capture returned ") + weftGetErrorString(r1) +
                                  ": " + why);
    if (graph != nullptr) d.destroy_graph(graph);
    d.release(eager);
    return;
  }
  const bool built = c.ok(r1, "all-reduce during capture") && c.ok(r2, "all-gather during capture") &&
                     c.ok(r3, "broadcast during capture") && c.ok(r4, "in-place all-reduce during capture") &&
                     graph != nullptr;
  for (int k = 0; built && k < 3; ++k) {
    const float kk = static_cast<float>(k + 1);
    for (size_t i = 0; i < kCount; ++i) {
      a[i] = static_cast<float>(me + 1) * kk + static_cast<float>(i % 5);
      a[kCount + i] = me == 0 ? 100.0f * kk + static_cast<float>(i % 3) : -1.0f;
      a[2 * kCount + i] = static_cast<float>(me + k) + static_cast<float>(i % 3);
    }
    const std::string replay = "graph replay " + std::to_string(k);
    if (!d.copy(da, a.data(), 3 * kCount * sizeof(float)) || !d.launch(graph)) break;
    c.ok(weftAllReduce(da, eager, kCount, weftFloat32, weftSum, c.comm, d.stream()), "eager all-reduce after " + replay);
    if (!d.copy(a.data(), da, bytes) || !d.copy(b.data(), db, bytes) || !d.copy(e.data(), eager, e.size() * 4) ||
        !d.synchronize()) {
      c.ok(weftUnhandledCudaError, replay);
      break;
    }
    c.calls += 5;
    const float fn = static_cast<float>(n);
    auto sum = [&](size_t i, void* w) {
      store(w, weftFloat32, 0, static_cast<double>(kk * fn * (fn + 1) / 2 + fn * static_cast<float>(i % 5)));
    };
    c.check(replay + ": all-reduce", b.data(), kCount, weftFloat32, sum);
    c.check(replay + ": eager all-reduce", e.data(), kCount, weftFloat32, sum);
    c.check(replay + ": all-gather", b.data() + kCount, un * kCount, weftFloat32, [&](size_t g, void* w) {
      store(w, weftFloat32, 0, static_cast<double>(static_cast<float>(g / kCount + 1) * kk + static_cast<float>(g % kCount % 5)));
    });
    c.check(replay + ": broadcast", a.data() + kCount, kCount, weftFloat32, [&](size_t i, void* w) {
      store(w, weftFloat32, 0, static_cast<double>(100.0f * kk + static_cast<float>(i % 3)));
    });
    c.check(replay + ": in-place all-reduce", a.data() + 2 * kCount, kCount, weftFloat32, [&](size_t i, void* w) {
      store(w, weftFloat32, 0, static_cast<double>(fn * (fn - 1) / 2 + fn * static_cast<float>(k + static_cast<int>(i % 3))));
    });
  }
  if (graph != nullptr) d.destroy_graph(graph);
  d.release(eager);
}

// --graph captured with the stand-in driver and two ranks: a replayed graph
// whose barrier waits for rank 1's held stream ends at the deadline; rank 0's
// communicator fails naming rank 1, rank 1's learns of it from rank 0, and
// the next call fails on both.
void run_device_graph_stuck(Checker& c) {
  DeviceMemory& d = *c.device;
  constexpr size_t kCount = 1000;
  auto* x = static_cast<float*>(d.alloc(kCount * sizeof(float)));
  weftComm_t sub = nullptr;
  if (x == nullptr || !c.ok(weftCommSplit(c.comm, 0, c.rank, &sub, nullptr), "split for a stuck graph")) return;
  void* graph = nullptr;
  if (c.ok(weftAllReduce(x, x, kCount, weftFloat32, weftSum, sub, d.stream()), "all-reduce before the capture") &&
      d.synchronize() && d.begin_capture()) {
    const weftResult_t rc = weftAllReduce(x, x, kCount, weftFloat32, weftSum, sub, d.stream());
    graph = d.end_capture();
    c.ok(rc, "all-reduce during capture");
  }
  if (graph == nullptr) {
    weftCommDestroy(sub);
    return;
  }
  if (c.rank == 1) d.hold(true);
  const auto t0 = std::chrono::steady_clock::now();
  c.ok(d.launch(graph) ? weftSuccess : weftUnhandledCudaError, "graph launch");
  weftResult_t async = weftSuccess;
  for (int i = 0; i < 200 && async == weftSuccess; ++i) {
    weftCommGetAsyncError(sub, &async);
    if (async == weftSuccess) usleep(50000);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const weftResult_t next = weftAllReduce(x, x, kCount, weftFloat32, weftSum, sub, d.stream());
  const std::string why = weftGetLastError(sub);
  const bool named = c.rank != 0 || (async == weftTimeout && why.find("for rank(s) 1, which have not reached it") !=
                                                                  std::string::npos && secs > 2.5);
  if (async == weftSuccess || next == weftSuccess || !named)
    c.ok(weftInternalError, std::string("a replayed graph beside a held stream: async error ") +
                                weftGetErrorString(async) + " after " + std::to_string(secs) + " s, the next call " +
                                weftGetErrorString(next) + ": " + why);
  if (c.rank == 1) d.hold(false);
  d.synchronize();
  d.destroy_graph(graph);
  weftCommDestroy(sub);
  d.release(x);
  std::printf("rank %d: a replayed graph beside a held stream fails after %.1f s: %s\n", c.rank, secs, why.c_str());
}

// --device with the stand-in driver and one rank: a stream that never reaches a
// call fails it at the deadline, and a copy the driver refuses fails the call
// and the communicator, each with a message that says so.
void run_device_faults(Checker& c) {
  DeviceMemory& d = *c.device;
  constexpr size_t kCount = 1000;
  auto* dev = static_cast<float*>(d.alloc(kCount * sizeof(float)));
  weftComm_t stuck = nullptr;
  if (!c.ok(weftCommSplit(c.comm, 0, 0, &stuck, nullptr), "split")) return;
  d.hold(true);
  c.ok(weftAllReduce(dev, dev, kCount, weftFloat32, weftSum, stuck, d.stream()), "all-reduce on a stuck stream");
  weftResult_t async = weftSuccess;
  for (int i = 0; i < 200 && async == weftSuccess; ++i) {
    weftCommGetAsyncError(stuck, &async);
    if (async == weftSuccess) usleep(50000);
  }
  std::string why = weftGetLastError(stuck);
  weftResult_t next = weftAllReduce(dev, dev, kCount, weftFloat32, weftSum, stuck, d.stream());
  if (async != weftTimeout || next == weftSuccess)
    c.ok(weftInternalError, std::string("a stream that never reached the call: async error ") +
                                weftGetErrorString(async) + ", the next call " + weftGetErrorString(next));
  d.hold(false);
  d.synchronize();
  weftCommDestroy(stuck);

  d.fail_next("cuMemcpyAsync");
  weftResult_t rc = weftAllReduce(dev, dev, kCount, weftFloat32, weftSum, c.comm, d.stream());
  why = weftGetLastError(c.comm);
  weftCommGetAsyncError(c.comm, &async);
  if (rc != weftUnhandledCudaError || why.find("copying the input") == std::string::npos ||
      async != weftUnhandledCudaError)
    c.ok(weftInternalError, std::string("a failed copy: ") + weftGetErrorString(rc) + " (" + why + "), async " +
                                weftGetErrorString(async));
  d.synchronize();
  d.release(dev);
  std::printf("rank %d: a stuck stream and a failed copy fail the call: %s\n", c.rank, why.c_str());
}

// --device with the stand-in driver and two ranks: rank 1's stream is held, so
// it never reaches an all-reduce, then a send/recv group; both ranks' calls fail
// by the deadline instead of leaving the streams waiting, rank 0's naming rank 1
// where the call went over cuda_p2p (its stream waits for rank 1).
void run_device_stuck_peer(Checker& c) {
  DeviceMemory& d = *c.device;
  constexpr size_t kCount = 1000;
  auto* dev = static_cast<float*>(d.alloc(kCount * sizeof(float)));
  auto* dev2 = static_cast<float*>(d.alloc(kCount * sizeof(float)));
  const char* disabled = std::getenv("WEFT_P2P_DISABLE");
  const bool p2p = disabled == nullptr || std::string(disabled) != "1";
  // `call` on a split communicator once before rank 1's stream is held (the
  // first device call chooses the path, or connects the pair: the ranks' host
  // threads meet), then beside the hold: the communicator's asynchronous error
  // comes (10 s at most) and the next call fails with it, which it leaves as
  // the last error. Over cuda_p2p rank 0 names rank 1: its own watchdog says
  // `waits`, or rank 1's watchdog fired first (rank 1 may have enqueued seconds
  // earlier) and rank 1's abort, saying its stream has not reached the call,
  // reached rank 0 first.
  auto beside_held_stream = [&](const char* what, const char* waits, auto call, auto on_split, auto before_destroy) {
    weftComm_t comm = nullptr;
    if (!c.ok(weftCommSplit(c.comm, 0, c.rank, &comm, nullptr), std::string("split for ") + what)) return;
    on_split(comm);
    c.ok(call(comm), std::string(what) + " before the hold");
    c.ok(d.synchronize() ? weftSuccess : weftUnhandledCudaError, "synchronize");
    if (c.rank == 1) d.hold(true);
    c.ok(call(comm), std::string(what) + " beside a held stream");
    weftResult_t async = weftSuccess;
    for (int i = 0; i < 200 && async == weftSuccess; ++i) {
      weftCommGetAsyncError(comm, &async);
      if (async == weftSuccess) usleep(50000);
    }
    const weftResult_t next = call(comm);
    const std::string why = weftGetLastError(comm);
    const bool named = !p2p || c.rank != 0 || why.find(waits) != std::string::npos ||
                       (why.find("rank 1 ") != std::string::npos && why.find("aborted") != std::string::npos &&
                        why.find("stream has not reached") != std::string::npos);
    if ((async != weftTimeout && async != weftRemoteError) || next == weftSuccess || !named)
      c.ok(weftInternalError, std::string(what) + " beside a held stream: async error " + weftGetErrorString(async) +
                                  ", the next call " + weftGetErrorString(next) + ": " + why);
    if (c.rank == 1) d.hold(false);
    d.synchronize();
    before_destroy(comm);
    weftCommDestroy(comm);
    std::printf("rank %d: %s beside a held stream fails: %s\n", c.rank, what, why.c_str());
  };
  auto nothing = [](weftComm_t) {};
  beside_held_stream(
      "all-reduce", "rank(s) 1",
      [&](weftComm_t comm) { return weftAllReduce(dev, dev, kCount, weftFloat32, weftSum, comm, d.stream()); },
      nothing, nothing);
  beside_held_stream(
      "send/recv", "waits for rank 1 (has not sent",
      [&](weftComm_t comm) {
        weftGroupStart();
        weftSend(dev, kCount, weftFloat32, 1 - c.rank, comm, d.stream());
        weftRecv(dev2, kCount, weftFloat32, 1 - c.rank, comm, d.stream());
        return weftGroupEnd();
      },
      nothing, nothing);
  // --windows: the same for an all-reduce on a symmetric window, which reads the
  // peer's window in place between two barriers. Deregistering it on the failed
  // communicator fails at once with the communicator's error (no wait for the
  // deadline); destroying the communicator then unmaps it.
  if (c.windows) {
    void* raw = nullptr;
    auto* buf = static_cast<float*>(d.alloc_aligned(kCount * sizeof(float), WEFT_WIN_REQUIRED_ALIGNMENT, &raw));
    weftWindow_t win = nullptr;
    beside_held_stream(
        "all-reduce on a window", "rank(s) 1",
        [&](weftComm_t comm) { return weftAllReduce(buf, buf, kCount, weftFloat32, weftSum, comm, d.stream()); },
        [&](weftComm_t comm) {
          c.ok(weftCommWindowRegister(comm, buf, kCount * sizeof(float), &win, WEFT_WIN_COLL_SYMMETRIC),
               "register a window");
        },
        [&](weftComm_t comm) {
          const auto t0 = std::chrono::steady_clock::now();
          const weftResult_t rc = weftCommWindowDeregister(comm, win);
          const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          if (rc == weftSuccess || ms > 1000)
            c.ok(weftInternalError, "deregistering a window of a failed communicator: " +
                                        std::string(weftGetErrorString(rc)) + " after " + std::to_string(ms) + " ms");
          std::printf("rank %d: deregistering the failed communicator's window: %s in %.0f ms\n", c.rank,
                      weftGetErrorString(rc), ms);
        });
    d.release(raw);
  }
  d.release(dev2);
  d.release(dev);
}

// --windows with the stand-in driver over cuda_p2p, where windows are shared: a
// window is unmapped only after every stream has finished the calls on it. Rank
// 1's stream is held for 300 ms over an all-reduce on a window, and every rank
// deregisters it at once; rank 1's deregistration must take the hold's time, and
// the sums must be right (a mapping closed under a stream that still reads it
// faults or reads wrong data).
void run_window_release(Checker& c) {
  DeviceMemory& d = *c.device;
  constexpr size_t kCount = 16384, kBytes = kCount * sizeof(float);
  void* raw = nullptr;
  auto* buf = static_cast<float*>(d.alloc_aligned(kBytes, WEFT_WIN_REQUIRED_ALIGNMENT, &raw));
  if (buf == nullptr) return (void)c.ok(weftUnhandledCudaError, "a window buffer");
  weftWindow_t win = nullptr;
  if (c.ok(weftCommWindowRegister(c.comm, buf, kBytes, &win, WEFT_WIN_COLL_SYMMETRIC), "register a window")) {
    std::vector<float> host(kCount);
    for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<float>((c.rank + 1) * (i % 1000));
    c.ok(d.copy(buf, host.data(), kBytes) && d.synchronize() ? weftSuccess : weftUnhandledCudaError, "fill");
    if (c.rank == 1) d.hold(true);
    c.ok(weftAllReduce(buf, buf, kCount, weftFloat32, weftSum, c.comm, d.stream()), "all-reduce on a held window");
    std::thread release;
    if (c.rank == 1) release = std::thread([&d] {
      usleep(300000);
      d.hold(false);
    });
    const auto t0 = std::chrono::steady_clock::now();
    c.ok(weftCommWindowDeregister(c.comm, win), "deregister beside a held stream");
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (release.joinable()) release.join();
    if (c.rank == 1 && ms < 250)
      c.ok(weftInternalError, "deregistering took " + std::to_string(ms) + " ms beside a stream held for 300 ms");
    c.ok(d.copy(host.data(), buf, kBytes) && d.synchronize() ? weftSuccess : weftUnhandledCudaError, "read back");
    const float ranks = static_cast<float>(c.n * (c.n + 1) / 2);
    c.check("all-reduce on a window deregistered beside a held stream", host.data(), kCount, weftFloat32,
          [&](size_t i, void* w) { *static_cast<float*>(w) = ranks * static_cast<float>(i % 1000); });
    std::printf("rank %d: a window deregistered beside a held stream: %.0f ms\n", c.rank, ms);
  }
  d.release(raw);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> counts = {"0", "1", "7", "1023"};
  std::vector<std::string> dtypes(kTypeNames, kTypeNames + 10), opnames(kOpNames, kOpNames + 5);
  std::map<std::string, std::string> expect;
  std::string driver;
  bool c_windows = false;
  std::string graph;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--counts" && i + 1 < argc) counts = split(argv[++i]);
    else if (a == "--device" && i + 1 < argc) driver = argv[++i];
    else if (a == "--windows") c_windows = true;
    else if (a == "--graph" && i + 1 < argc && (std::string(argv[i + 1]) == "captured" ||
                                                std::string(argv[i + 1]) == "refused")) graph = argv[++i];
    else if (a == "--probe-device" && i + 1 < argc) {
      // For the GPU tests: 77 (a skip) where the driver or a device is missing.
      DeviceMemory probe;
      if (probe.open(argv[++i], 0)) return 0;
      std::printf("skipped: no usable CUDA device through %s\n", argv[i]);
      return 77;
    }
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
      std::fprintf(stderr, "usage: %s [--counts a,b] [--dtypes ...] [--ops ...] [--expect-algo coll=NAME,...] "
                           "[--device DRIVER [--windows] [--graph captured|refused]] | --probe-device DRIVER\n",
                   argv[0]);
      return 2;
    }
  }
  Checker c;
  c.expect = expect;
  c.windows = c_windows && !driver.empty();
  DeviceMemory device;
  if (!driver.empty()) {
    const char* r = std::getenv("WEFT_RANK");
    if (!device.open(driver, r != nullptr ? std::atoi(r) : 0)) return 1;
    c.device = &device;
  }
  // The steps that hold a rank's stream (stand-in driver) fail split
  // communicators at WEFT_TIMEOUT_MS, short in these tests, and the ranks may
  // leave such a step most of that apart (each can wait for its own error); the
  // world communicator, whose splits begin the next step, waits longer, so that
  // the skew is not taken for a hang there.
  weftConfig_t world = WEFT_CONFIG_INITIALIZER;
  if (c.device != nullptr && device.is_fake()) {
    const char* ms = std::getenv("WEFT_TIMEOUT_MS");
    if (ms != nullptr) world.timeoutMs = std::max<int64_t>(60000, std::atoll(ms));
  }
  if (weftCommInitFromEnv(&c.comm, &world) != weftSuccess) {
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
  if (c.device != nullptr && device.is_fake()) run_device_rules(c);
  for (const auto& cs : counts) {
    size_t count = std::strtoull(cs.c_str(), nullptr, 0);
    for (const auto& d : dtypes) run_type(c, index_of(kTypeNames, 10, d), count, ops);
    run_p2p(c, count);
    for (int t : {weftFloat32, weftFloat16, weftInt32, weftBfloat16}) run_premul_and_async(c, t, count);
    for (int t : {weftFloat32, weftInt32, weftBfloat16}) run_premul_scalar_device(c, t, count);
    c.ok(weftBarrier(c.comm), "barrier");
  }
  if (c.device != nullptr && !graph.empty()) run_device_graph(c, graph == "captured");
  if (c.device != nullptr && device.is_fake() && c.n == 2 && graph == "captured") run_device_graph_stuck(c);
  if (c.device != nullptr && device.is_fake() && c.n == 1) run_device_faults(c);
  if (c.device != nullptr && device.is_fake() && c.n == 2) run_device_stuck_peer(c);
  const char* no_p2p = std::getenv("WEFT_P2P_DISABLE");
  const bool shared_windows = c.windows && (no_p2p == nullptr || std::string(no_p2p) != "1");
  if (shared_windows && device.is_fake() && c.n >= 2) run_window_release(c);
  std::string algo_note;
  for (const auto& [coll, name] : c.expect) algo_note += (algo_note.empty() ? ", forced " : ", ") + coll + "=" + name;
  if (!c.expect.empty()) algo_note += ": " + std::to_string(c.checked_algo) + " call shapes checked";
  std::printf("rank %d/%d: %" PRId64 " calls, %" PRId64 " wrong elements, %" PRId64 " failed calls%s\n",
              c.rank, c.n, c.calls, c.wrong, c.failures, algo_note.c_str());
  // Destroying waits (by the deadline) only for what a stream still has to
  // do: after the failed copy above, no slot of it, which nothing on the stream
  // will free (the world communicator's deadline here is 60 s).
  const auto t0 = std::chrono::steady_clock::now();
  weftCommDestroy(c.comm);
  const double destroy_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (world.timeoutMs > 0 && destroy_s > 10) {
    std::printf("FAIL: rank %d: destroying the communicator took %.1f s\n", c.rank, destroy_s);
    return 1;
  }
  return c.wrong == 0 && c.failures == 0 ? 0 : 1;
}
