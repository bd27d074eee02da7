// Soak: a long seeded run of random operations, every result checked element by
// element, run under weft-run. Every rank draws the same decisions from the seed:
// which communicator (the world, or one split from another with random colors,
// keys and forced algorithms, created and destroyed along the way), which
// collective or point-to-point exchange, datatype, op, count (0, small primes, up to
// 262147 elements), in place or not, blocking, posted and waited for later, or in a
// group. Expected values are exact (exact_values.h), computed here.
//
//   weft-soak --seed S --ops N
//
// Leaks: with only the world communicator left, open file descriptors, weft shared
// memory segments and the bytes held from malloc are sampled at every tenth of the
// run from the third on (after a warm-up at the largest size, until online tuning
// has settled there, since buffers keep their high-water mark); descriptors and
// segments must not grow, and malloc'd bytes must not grow in most windows between
// samples (a leak does; a cache reaching a new high-water mark grows in one) by
// more than 256 KiB in all.
// Prints per rank "SOAK rank R: ..." with a digest of every result, equal for equal
// seeds (and job sizes); exit 0 when nothing was wrong, 3 on a wrong element, 4 on
// a leak, 1 on an error from weft.
#include <malloc.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "exact_values.h"
#include "process_usage.h"

namespace {
using namespace weft_test;

int g_rank = -1;
uint64_t g_wrong = 0;
uint64_t g_digest = 1469598103934665603ull;  // FNV-1a of every checked result

[[noreturn]] void die_weft(const char* what, weftComm_t comm) {
  std::printf("rank %d: FAIL: %s: %s\n", g_rank, what, weftGetLastError(comm));
  std::fflush(stdout);
  std::exit(1);
}
void ok(weftResult_t rc, const char* what, weftComm_t comm) {
  if (rc != weftSuccess) die_weft(what, comm);
}

// One communicator of the pool, as this rank sees it (comm NULL: not a member).
struct Slot {
  weftComm_t comm = nullptr;
  int n = 0, me = -1;
  std::string algo;  // forced per collective ("" = the tuner's choice)
};

const char* kColls[] = {"allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall"};
// Collectives with a choice of algorithm (all-to-all has one).
constexpr size_t kChoosable = 5;

const size_t kCounts[] = {0, 1, 2, 3, 5, 7, 13, 31, 127, 1021, 4099, 16381, 65537, 262147};

// A buffer of `count` elements of `type` holding rank r's input for op.
std::vector<unsigned char> inputs(int type, int op, int r, size_t count, size_t first = 0) {
  std::vector<unsigned char> b(count * kTypeSize[type] + 1);
  for (size_t i = 0; i < count; ++i) store(b.data(), type, i, static_cast<double>(input_for(type, op, r, first + i)));
  return b;
}

// The exact result of op over ranks 0..n-1 at element i (the bitwise ops folded here).
void want_reduced(int type, int op, int n, size_t i, void* out) {
  if (op < weftBand) {
    expected(type, op, n, i, out);
    return;
  }
  int64_t acc = input_for(type, weftSum, 0, i);
  for (int r = 1; r < n; ++r) {
    const int64_t v = input_for(type, weftSum, r, i);
    acc = op == weftBand ? (acc & v) : op == weftBor ? (acc | v) : (acc ^ v);
  }
  store(out, type, 0, static_cast<double>(acc));
}

// Compares count elements of buf with want(i, out) and folds them into the digest.
void check(const char* what, const void* buf, size_t count, int type, const std::function<void(size_t, void*)>& want) {
  const size_t es = kTypeSize[type];
  unsigned char w[8];
  for (size_t i = 0; i < count; ++i) {
    want(i, w);
    const unsigned char* got = static_cast<const unsigned char*>(buf) + i * es;
    for (size_t b = 0; b < es; ++b) g_digest = (g_digest ^ got[b]) * 1099511628211ull;
    if (std::memcmp(got, w, es) != 0 && g_wrong++ < 10)
      std::printf("rank %d: WRONG %s (%s): element %zu of %zu\n", g_rank, what, kTypeNames[type], i, count);
  }
}

// An operation in flight: its buffers and how to check them once it is done.
struct Call {
  std::vector<unsigned char> send, recv;
  weftRequest_t req = nullptr;
  std::function<void(Call&)> verify;
};

struct Stats {
  uint64_t colls = 0, p2p = 0, splits = 0, destroys = 0, async = 0, groups = 0, inplace = 0;
};

long live_kib() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<long>((m.uordblks + m.hblkhd) / 1024);
}
long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

class Soak {
 public:
  Soak(uint64_t seed, weftComm_t world) : rng_(seed) {
    Slot w;
    w.comm = world;
    weftCommCount(world, &w.n);
    weftCommUserRank(world, &w.me);
    world_n_ = w.n;
    pool_.push_back(w);
    // What a split communicator may force, per collective: the candidates weft
    // weighs on this job's layout (the same on every rank), so a new algorithm is
    // soaked too and one this layout cannot run (hierarchical on one host) is not.
    for (size_t i = 0; i < kChoosable; ++i) {
      weftAlgoExplanation_t ex;
      ok(weftCommExplainAlgorithm(world, kColls[i], 4099, weftFloat32, 0, &ex), "weftCommExplainAlgorithm", world);
      algos_[i].assign(ex.candidates, ex.candidates + ex.ncandidates);
    }
  }

  void run(uint64_t ops) {
    warm_up();
    for (uint64_t op = 0; op < ops; ++op) {
      // Samples at every tenth from the third on (the world alone each time).
      if (op > 0 && op % (ops / 10 == 0 ? 1 : ops / 10) == 0 && op * 10 >= ops * 3) {
        samples_.emplace_back();
        measure(&samples_.back());
      }
      step();
    }
    measure(&after_);
    if (samples_.empty()) samples_.push_back(after_);
    before_ = samples_.front();
    samples_.push_back(after_);
  }

  void report(uint64_t ops) const {
    const bool leak = leaked();
    std::printf("SOAK rank %d: %" PRIu64 " ops (%" PRIu64 " collectives, %" PRIu64 " point-to-point rings, %" PRIu64
                " splits, %" PRIu64 " destroys, %" PRIu64 " posted, %" PRIu64 " groups, %" PRIu64
                " in place), %" PRIu64 " wrong elements, digest %016" PRIx64 ", fds %d -> %d, shm %d -> %d, malloc'd "
                "%ld -> %ld KiB (resident %ld -> %ld KiB)%s\n",
                g_rank, ops, st_.colls, st_.p2p, st_.splits, st_.destroys, st_.async, st_.groups, st_.inplace, g_wrong,
                g_digest, before_.fds, after_.fds, before_.shm, after_.shm, before_.live, after_.live, before_.rss,
                after_.rss, leak ? " LEAK" : "");
    if (leak) {
      std::printf("rank %d: malloc'd KiB at each sample:", g_rank);
      for (const Usage& u : samples_) std::printf(" %ld", u.live);
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  bool leaked() const {
    // A leak grows in most windows between samples; a buffer or plan cache reaching a
    // new high-water mark grows in one (and stays: a 40,000-op run adds
    // 0.03 MiB after step 12,000), and caches of size classes fill slowly (10-20 bytes per
    // operation at first). 32 KiB per window of 1,000 ops: a leak of one small
    // object per call is seen.
    size_t grew = 0;
    for (size_t i = 1; i < samples_.size(); ++i) grew += samples_[i].live - samples_[i - 1].live > 32;
    return after_.fds > before_.fds || after_.shm > before_.shm ||
           (2 * grew > samples_.size() - 1 && after_.live - before_.live > 256);
  }

 private:
  struct Usage {
    int fds = 0, shm = 0;
    long live = 0, rss = 0;
  };

  // Always consumes one number, so that ranks stay in step even where n differs
  // (a color's size) or is 0 (not a member).
  uint64_t draw(uint64_t n) {
    const uint64_t x = rng_();
    return n == 0 ? 0 : x % n;
  }

  void step() {
    const uint64_t what = draw(1000);
    if (what < 15 && pool_.size() < 4) return split();
    if (what < 30 && pool_.size() > 1) return destroy(1 + draw(pool_.size() - 1));
    if (what < 60) return flush();
    Slot& s = pool_[draw(pool_.size())];
    if (what < 110) return ring(s);
    if (what < 150) return group(s);
    const bool posted = what < 450;
    auto call = collective(s, posted);
    if (call == nullptr) return;
    if (!posted) {
      call->verify(*call);
      return;
    }
    ++st_.async;
    pending_.push_back(std::move(call));
    if (pending_.size() > 16) flush();
  }

  // The world's buffers grow to the largest message they carry and stay: every
  // collective at the largest size, in place and not, before anything is
  // measured, so that growth afterwards is a leak and not a high-water mark.
  // Online tuning (online.h) runs other candidates than the model's pick on a size
  // class's first calls, and some need more scratch: each collective runs at the
  // largest count of every element size until that class's trial has settled
  // (with one call each, seed 15 at 5 ranks: the world's scratch went from 2 to
  // 4 MiB between ops 6,000 and 7,000, when a trial got to one of those).
  void warm_up() {
    const Slot& w = pool_[0];
    const size_t count = kCounts[sizeof kCounts / sizeof kCounts[0] - 1];
    std::vector<double> a(count * static_cast<size_t>(w.n), 1.0), b(a.size(), 0.0);
    for (int kind = 0; kind < 6; ++kind)
      for (weftDataType_t type : {weftUint8, weftFloat16, weftFloat32, weftFloat64})  // each element size
        for (int calls = 0, settled = 0; !settled && calls < kMaxWarmUpCalls; ++calls) {
          warm_call(kind, type, count, calls % 2 == 1 && kind != 5, a.data(), b.data());
          settled = calls >= 1 && settled_everywhere(kind, type, count);
        }
  }

  // Ends the warm-up of a class that does not settle (WEFT_TUNE_ROUNDS and the
  // like are unbounded); with the defaults every class here settles within 340
  // calls at 5 and 8 ranks (1-byte elements the most: a turn is many short calls).
  static constexpr int kMaxWarmUpCalls = 2000;

  // One blocking collective of the world on a and b (each count * n doubles).
  void warm_call(int kind, weftDataType_t type, size_t count, bool inplace, double* a, double* b) {
    const Slot& w = pool_[0];
    const size_t es = kTypeSize[type];
    auto* in = reinterpret_cast<unsigned char*>(inplace ? b : a);
    auto* out = reinterpret_cast<unsigned char*>(b);
    unsigned char* mine = out + static_cast<size_t>(w.me) * count * es;
    weftResult_t rc = weftSuccess;
    switch (kind) {
      case 0: rc = weftAllReduce(in, out, count, type, weftSum, w.comm, nullptr); break;
      case 1: rc = weftBroadcast(in, out, count, type, 0, w.comm, nullptr); break;
      case 2: rc = weftReduce(in, out, count, type, weftSum, 0, w.comm, nullptr); break;
      case 3: rc = weftAllGather(inplace ? mine : in, out, count, type, w.comm, nullptr); break;
      case 4: rc = weftReduceScatter(in, inplace ? mine : out, count, type, weftSum, w.comm, nullptr); break;
      default: rc = weftAlltoAll(in, out, count, type, w.comm, nullptr);
    }
    ok(rc, "warm-up", w.comm);
  }

  // Whether online tuning has settled this call's class on every rank (they agree
  // on it, but the loop above must end on the same call everywhere regardless).
  bool settled_everywhere(int kind, weftDataType_t type, size_t count) {
    const Slot& w = pool_[0];
    const char* algo = nullptr;
    int settled = 0;
    ok(weftCommGetAlgorithm(w.comm, kColls[kind], count, type, 0, &algo, &settled), "weftCommGetAlgorithm", w.comm);
    int32_t all = settled;
    ok(weftAllReduce(&all, &all, 1, weftInt32, weftMin, w.comm, nullptr), "warm-up", w.comm);
    return all != 0;
  }

  // Waits for every posted operation and checks it.
  void flush() {
    for (auto& c : pending_) {
      ok(weftWait(&c->req), "weftWait", nullptr);
      c->verify(*c);
    }
    pending_.clear();
  }

  // A random collective on s, issued (posted when the caller keeps it); null when
  // this rank is not a member. Every rank draws the same numbers either way.
  std::unique_ptr<Call> collective(Slot& s, bool post = true, bool* inplace_out = nullptr) {
    const int kind = static_cast<int>(draw(6));
    const int type = static_cast<int>(draw(kNumTypes));
    const bool integer = !is_float(type);
    const int op = static_cast<int>(draw(integer ? 8 : 5));
    size_t count = kCounts[draw(sizeof kCounts / sizeof kCounts[0])];
    if (count > 4099 && draw(4) != 0) count = kCounts[draw(10)];  // large ones rarer
    const int root = static_cast<int>(draw(static_cast<uint64_t>(s.n)));
    const bool inplace = draw(3) == 0 && kind != 5;
    if (s.comm == nullptr) return nullptr;
    ++st_.colls;
    st_.inplace += inplace;
    if (inplace_out) *inplace_out = inplace;
    const int n = s.n, me = s.me;
    const size_t es = kTypeSize[type];
    auto c = std::make_unique<Call>();
    weftComm_t comm = s.comm;
    weftResult_t rc = weftSuccess;
    const auto dt = static_cast<weftDataType_t>(type);
    const auto rop = static_cast<weftRedOp_t>(op);
    auto fill = [&](size_t elems, unsigned char byte) { c->recv.assign(elems * es + 1, byte); };
    switch (kind) {
      case 0:  // all-reduce
        c->send = inputs(type, op, me, count);
        if (inplace) c->recv = c->send;
        else fill(count, 0x5a);
        rc = post ? weftAllReduceAsync(inplace ? c->recv.data() : c->send.data(), c->recv.data(), count, dt, rop, comm,
                                       &c->req)
                  : weftAllReduce(inplace ? c->recv.data() : c->send.data(), c->recv.data(), count, dt, rop, comm,
                                  nullptr);
        c->verify = [=](Call& k) {
          check("allreduce", k.recv.data(), count, type, [&](size_t i, void* w) { want_reduced(type, op, n, i, w); });
        };
        break;
      case 1:  // broadcast
        c->send = inputs(type, weftSum, me, count);
        if (inplace) c->recv = c->send;
        else fill(count, 0x5a);
        rc = post ? weftBroadcastAsync(inplace ? c->recv.data() : c->send.data(), c->recv.data(), count, dt, root,
                                       comm, &c->req)
                  : weftBroadcast(inplace ? c->recv.data() : c->send.data(), c->recv.data(), count, dt, root, comm,
                                  nullptr);
        c->verify = [=](Call& k) {
          check("broadcast", k.recv.data(), count, type,
                [&](size_t i, void* w) { store(w, type, 0, static_cast<double>(input_for(type, weftSum, root, i))); });
        };
        break;
      case 2:  // reduce
        c->send = inputs(type, op, me, count);
        if (inplace) c->recv = c->send;
        else fill(count, 0x5a);
        rc = post ? weftReduceAsync(inplace ? c->recv.data() : c->send.data(), c->recv.data(), count, dt, rop, root,
                                    comm, &c->req)
                  : weftReduce(inplace ? c->recv.data() : c->send.data(), c->recv.data(), count, dt, rop, root, comm,
                               nullptr);
        c->verify = [=](Call& k) {
          if (me == root)
            check("reduce", k.recv.data(), count, type, [&](size_t i, void* w) { want_reduced(type, op, n, i, w); });
        };
        break;
      case 3: {  // all-gather: rank r's block is its input
        fill(count * static_cast<size_t>(n), 0x5a);
        c->send = inputs(type, weftSum, me, count);
        unsigned char* mine = c->recv.data() + static_cast<size_t>(me) * count * es;
        if (inplace && count > 0) std::memcpy(mine, c->send.data(), count * es);
        const void* src = inplace ? mine : c->send.data();
        rc = post ? weftAllGatherAsync(src, c->recv.data(), count, dt, comm, &c->req)
                  : weftAllGather(src, c->recv.data(), count, dt, comm, nullptr);
        c->verify = [=](Call& k) {
          check("allgather", k.recv.data(), count * static_cast<size_t>(n), type, [&](size_t i, void* w) {
            store(w, type, 0, static_cast<double>(input_for(type, weftSum, static_cast<int>(i / count), i % count)));
          });
        };
        break;
      }
      case 4: {  // reduce-scatter: block r of the reduction of everyone's n blocks
        const size_t total = count * static_cast<size_t>(n);
        c->send = inputs(type, op, me, total);
        if (inplace) c->recv = c->send;
        else fill(count, 0x5a);
        unsigned char* out = inplace ? c->recv.data() + static_cast<size_t>(me) * count * es : c->recv.data();
        rc = post ? weftReduceScatterAsync(inplace ? c->recv.data() : c->send.data(), out, count, dt, rop, comm,
                                           &c->req)
                  : weftReduceScatter(inplace ? c->recv.data() : c->send.data(), out, count, dt, rop, comm, nullptr);
        const size_t at = inplace ? static_cast<size_t>(me) * count : 0;
        c->verify = [=](Call& k) {
          check("reducescatter", k.recv.data() + at * es, count, type, [&](size_t i, void* w) {
            want_reduced(type, op, n, static_cast<size_t>(me) * count + i, w);
          });
        };
        break;
      }
      default: {  // all-to-all: block j from rank j is its input at me * count + i
        c->send = inputs(type, weftSum, me, count * static_cast<size_t>(n));
        fill(count * static_cast<size_t>(n), 0x5a);
        rc = post ? weftAlltoAllAsync(c->send.data(), c->recv.data(), count, dt, comm, &c->req)
                  : weftAlltoAll(c->send.data(), c->recv.data(), count, dt, comm, nullptr);
        c->verify = [=](Call& k) {
          check("alltoall", k.recv.data(), count * static_cast<size_t>(n), type, [&](size_t i, void* w) {
            const size_t from = i / count;
            store(w, type, 0,
                  static_cast<double>(input_for(type, weftSum, static_cast<int>(from), static_cast<size_t>(me) * count +
                                                                                         i % count)));
          });
        };
      }
    }
    if (rc != weftSuccess) die_weft(kColls[kind], comm);
    return c;
  }

  // Every member sends its input to the next and receives the previous one's.
  void ring(Slot& s) {
    const int type = static_cast<int>(draw(kNumTypes));
    const size_t count = kCounts[draw(sizeof kCounts / sizeof kCounts[0])];
    if (s.comm == nullptr) return;
    ++st_.p2p;
    const auto dt = static_cast<weftDataType_t>(type);
    std::vector<unsigned char> send = inputs(type, weftSum, s.me, count), recv(count * kTypeSize[type] + 1, 0x5a);
    const int next = (s.me + 1) % s.n, prev = (s.me + s.n - 1) % s.n;
    ok(weftGroupStart(), "weftGroupStart", s.comm);
    ok(weftSend(send.data(), count, dt, next, s.comm, nullptr), "weftSend", s.comm);
    ok(weftRecv(recv.data(), count, dt, prev, s.comm, nullptr), "weftRecv", s.comm);
    ok(weftGroupEnd(), "weftGroupEnd (point-to-point ring)", s.comm);
    check("send/recv ring", recv.data(), count, type,
          [&](size_t i, void* w) { store(w, type, 0, static_cast<double>(input_for(type, weftSum, prev, i))); });
  }

  // Two or three blocking collectives of s recorded in a group and run by its end.
  void group(Slot& s) {
    const int k = 2 + static_cast<int>(draw(2));
    std::vector<std::unique_ptr<Call>> calls;
    if (s.comm != nullptr) ok(weftGroupStart(), "weftGroupStart", s.comm);
    for (int i = 0; i < k; ++i)
      if (auto c = collective(s, false)) calls.push_back(std::move(c));
    if (s.comm == nullptr) return;
    ++st_.groups;
    ok(weftGroupEnd(), "weftGroupEnd (collectives)", s.comm);
    for (auto& c : calls) c->verify(*c);
  }

  // A communicator split from a random one: random colors (some ranks in none),
  // random keys, and a random forced algorithm per collective.
  void split() {
    const size_t from = draw(pool_.size());
    std::vector<int> color(static_cast<size_t>(world_n_)), key(static_cast<size_t>(world_n_));
    for (int r = 0; r < world_n_; ++r) {
      const uint64_t c = draw(5);
      color[static_cast<size_t>(r)] = c == 4 ? WEFT_SPLIT_NOCOLOR : static_cast<int>(c % 2);
      key[static_cast<size_t>(r)] = static_cast<int>(draw(100));
    }
    std::string algo;
    if (draw(2) == 0)
      for (size_t i = 0; i < kChoosable; ++i)
        algo += std::string(i ? "," : "") + kColls[i] + ":" + algos_[i][draw(algos_[i].size())].algorithm;
    flush();  // a split is ordered after everything posted; wait here so buffers stay simple
    Slot& parent = pool_[from];
    Slot child;
    child.algo = algo;
    if (parent.comm != nullptr) {
      ++st_.splits;
      weftConfig_t cfg = WEFT_CONFIG_INITIALIZER;
      cfg.algo = algo.empty() ? nullptr : algo.c_str();
      const size_t r = static_cast<size_t>(g_rank);
      ok(weftCommSplit(parent.comm, color[r], key[r], &child.comm, &cfg), "weftCommSplit", parent.comm);
      if (child.comm != nullptr) {
        weftCommCount(child.comm, &child.n);
        weftCommUserRank(child.comm, &child.me);
      }
    }
    // Every rank keeps the slot (empty where it is not a member) so that the pool
    // stays the same size everywhere. The numbering of ranks that share a color
    // comes from their key; nothing here needs more than n and me.
    pool_.push_back(child);
  }

  void destroy(size_t i) {
    flush();
    if (pool_[i].comm != nullptr) {
      ++st_.destroys;
      ok(weftCommDestroy(pool_[i].comm), "weftCommDestroy", nullptr);
    }
    pool_.erase(pool_.begin() + static_cast<long>(i));
  }

  void measure(Usage* u) {
    while (pool_.size() > 1) destroy(pool_.size() - 1);
    flush();
    ok(weftBarrier(pool_[0].comm), "weftBarrier", pool_[0].comm);  // every rank's segments gone
    u->fds = count_fds();
    u->shm = count_shm_segments();
    u->live = live_kib();
    u->rss = rss_kib();
  }

  std::mt19937_64 rng_;
  std::vector<weftAlgoCandidate_t> algos_[kChoosable];
  int world_n_ = 0;
  std::vector<Slot> pool_;
  std::deque<std::unique_ptr<Call>> pending_;
  Stats st_;
  Usage before_, after_;
  std::vector<Usage> samples_;
};

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1, ops = 10000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seed") == 0) seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--ops") == 0) ops = std::strtoull(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: %s --seed S --ops N\n", argv[0]);
      return 2;
    }
  }
  weftComm_t world;
  if (weftCommInitFromEnv(&world, nullptr) != weftSuccess) die_weft("init", nullptr);
  weftCommUserRank(world, &g_rank);
  int n = 0;
  weftCommCount(world, &n);
  if (n > kMaxRanks) {
    std::printf("rank %d: FAIL: at most %d ranks (exact_values.h)\n", g_rank, kMaxRanks);
    return 2;
  }
  Soak soak(seed, world);
  soak.run(ops);
  soak.report(ops);
  ok(weftCommDestroy(world), "weftCommDestroy", nullptr);
  if (g_wrong > 0) return 3;
  return soak.leaked() ? 4 : 0;
}
