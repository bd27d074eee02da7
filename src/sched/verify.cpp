#include "sched/verify.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace weft::sched {
namespace {

// One symbolic element: which element of the collective's result it belongs to
// (`idx`) and the set of ranks whose input it already contains. mask 0 = never
// written.
struct Val {
  uint64_t idx = 0;
  uint64_t mask = 0;
  bool defined() const { return mask != 0; }
  bool operator==(const Val& o) const { return idx == o.idx && mask == o.mask; }
};

constexpr int kMaxRanks = 64;

uint64_t bit(int r) { return uint64_t{1} << r; }
uint64_t all_ranks(int n) { return n >= 64 ? ~uint64_t{0} : bit(n) - 1; }

std::string mask_str(uint64_t mask) {
  std::string out;
  for (int r = 0; r < kMaxRanks;) {
    if (!(mask & bit(r))) {
      ++r;
      continue;
    }
    int e = r;
    while (e + 1 < kMaxRanks && (mask & bit(e + 1))) ++e;
    if (!out.empty()) out += ",";
    out += std::to_string(r);
    if (e > r) {  // appended piecewise: GCC 12's -Wrestrict misfires on "-" + to_string at -O3
      out += '-';
      out += std::to_string(e);
    }
    r = e + 1;
  }
  return out;
}

std::string val_str(const Val& v) {
  if (!v.defined()) return "undefined";
  return "{element " + std::to_string(v.idx) + " from ranks " + mask_str(v.mask) + "}";
}

std::string elem_str(Buf buf, uint64_t offset) {
  return std::string(buf_name(buf)) + "[" + std::to_string(offset) + "]";
}

// Messages from one rank to another, in send order. Payloads share one arena per
// pair so a run does not allocate per message.
struct Fifo {
  struct Hdr {
    size_t begin, count;
    size_t step;  // sender's step index, for error messages
  };
  std::vector<Val> data;
  std::vector<Hdr> msgs;
  size_t head = 0;
  bool empty() const { return head == msgs.size(); }
  void clear() {
    data.clear();
    msgs.clear();
    head = 0;
  }
};

// Where a Range lives: user memory (Send and Recv, aliased in place) or scratch.
struct Loc {
  int array;  // 0 user, 1 scratch
  uint64_t begin, end;
};

// A send whose peer has not received it yet; it still reads `loc`.
struct InFlight {
  Loc loc;
  int peer;
  uint64_t seq;  // index among this rank's sends to peer: delivered once peer received more
  size_t step;
};

// A receive that took its message but may not write yet (see blocking_send).
struct Stage {
  bool full = false;
  std::vector<Val> data;
};

class Sim {
 public:
  Sim(const Schedule& s, bool in_place) : s_(s), a_(s.args), in_place_(in_place), n_(a_.nranks) {}

  Status run() {
    WEFT_TRY(check_args());
    init_memory();
    std::vector<size_t> pc(static_cast<size_t>(n_), 0);
    for (;;) {
      bool progress = false, all_done = true;
      for (int r = 0; r < n_; ++r) {
        const auto& steps = s_.ranks[static_cast<size_t>(r)].steps;
        size_t& i = pc[static_cast<size_t>(r)];
        while (i < steps.size()) {
          Outcome out = Outcome::Done;
          WEFT_TRY(exec(r, i, steps[i], &out));
          if (out != Outcome::Blocked) progress = true;
          if (out != Outcome::Done) break;
          ++i;
        }
        if (i < steps.size()) all_done = false;
      }
      if (all_done) break;
      if (!progress) return deadlock(pc);
    }
    WEFT_TRY(check_leftovers());
    return check_results();
  }

 private:
  Status fail(const std::string& what) const {
    char ctx[160];
    std::snprintf(ctx, sizeof ctx, "verify %s %s n=%d count=%llu root=%d slice=%llu %s: ", s_.algo.c_str(),
                  coll_name(a_.coll), n_, static_cast<unsigned long long>(a_.count), a_.root,
                  static_cast<unsigned long long>(a_.slice_elems), in_place_ ? "in-place" : "out-of-place");
    return Status(weftInternalError, ctx + what);
  }
  Status fail_step(int r, size_t i, const Step& st, const std::string& what) const {
    return fail("rank " + std::to_string(r) + " step " + std::to_string(i) + " (" + to_string(st) + "): " + what);
  }

  Status check_args() const {
    if (n_ < 1 || n_ > kMaxRanks) return fail("nranks must be in [1, 64]");
    if (static_cast<int>(s_.ranks.size()) != n_)
      return fail("schedule has " + std::to_string(s_.ranks.size()) + " rank plans, expected " + std::to_string(n_));
    if (a_.root < 0 || a_.root >= n_) return fail("root out of range");
    return Status::Ok();
  }

  Fifo& fifo(int from, int to) { return fifos_[static_cast<size_t>(from * n_ + to)]; }

  struct Mem {
    std::vector<Val> user, scratch;
    uint64_t send_base = 0, recv_base = 0;
  };

  void init_memory() {
    const uint64_t S = send_count(a_), R = recv_count(a_), c = a_.count, n = static_cast<uint64_t>(n_);
    S_ = S;
    R_ = R;
    inflight_.assign(static_cast<size_t>(n_), {});
    stage_.assign(static_cast<size_t>(n_), {});
    sent_.assign(static_cast<size_t>(n_ * n_), 0);
    recvd_.assign(static_cast<size_t>(n_ * n_), 0);
    fifos_.resize(static_cast<size_t>(n_ * n_));
    for (Fifo& f : fifos_) f.clear();
    mem_.resize(static_cast<size_t>(n_));
    for (int r = 0; r < n_; ++r) {
      Mem& m = mem_[static_cast<size_t>(r)];
      m.send_base = m.recv_base = 0;
      const uint64_t ur = static_cast<uint64_t>(r);
      if (!in_place_) {
        m.user.assign(S + R, Val{});
        m.send_base = 0;
        m.recv_base = S;
      } else if (a_.coll == Coll::AllGather) {  // sendbuff = recvbuff + rank*count
        m.user.assign(R, Val{});
        m.recv_base = 0;
        m.send_base = ur * c;
      } else if (a_.coll == Coll::ReduceScatter) {  // recvbuff = sendbuff + rank*count
        m.user.assign(S, Val{});
        m.send_base = 0;
        m.recv_base = ur * c;
      } else {
        m.user.assign(S, Val{});
      }
      m.scratch.assign(s_.ranks[static_cast<size_t>(r)].scratch_count, Val{});
      for (uint64_t i = 0; i < S; ++i) m.user[m.send_base + i] = initial(r, i, n, c);
    }
  }

  // The Send buffer's contents before the call.
  Val initial(int r, uint64_t i, uint64_t n, uint64_t c) const {
    switch (a_.coll) {
      case Coll::AllReduce:
      case Coll::Reduce:
      case Coll::ReduceScatter: return {i, bit(r)};
      case Coll::Broadcast: return r == a_.root ? Val{i, bit(r)} : Val{};  // only the root's counts
      case Coll::AllGather: return {static_cast<uint64_t>(r) * c + i, bit(r)};
      case Coll::AllToAll: {  // block p goes to peer p; name it (sender, receiver, i)
        const uint64_t p = i / c, k = i % c;
        return {(static_cast<uint64_t>(r) * n + p) * c + k, bit(r)};
      }
    }
    return {};
  }

  // What Recv[i] of rank r must hold afterwards; false when unspecified.
  bool expected(int r, uint64_t i, Val* out) const {
    const uint64_t n = static_cast<uint64_t>(n_), c = a_.count, ur = static_cast<uint64_t>(r);
    switch (a_.coll) {
      case Coll::AllReduce: *out = {i, all_ranks(n_)}; return true;
      case Coll::Broadcast: *out = {i, bit(a_.root)}; return true;
      case Coll::Reduce:
        if (r != a_.root) return false;
        *out = {i, all_ranks(n_)};
        return true;
      case Coll::AllGather: *out = {i, bit(static_cast<int>(i / c))}; return true;
      case Coll::ReduceScatter: *out = {ur * c + i, all_ranks(n_)}; return true;
      case Coll::AllToAll: {
        const uint64_t q = i / c, k = i % c;
        *out = {(q * n + ur) * c + k, bit(static_cast<int>(q))};
        return true;
      }
    }
    return false;
  }

  // Bounds and access rights; on success *loc says where the range lives.
  Status locate(int r, size_t i, const Step& st, const Range& rg, bool write, Loc* loc) {
    if (rg.count == 0) return fail_step(r, i, st, "zero-length range (builders must not emit empty steps)");
    uint64_t size = 0;
    switch (rg.buf) {
      case Buf::Send: size = S_; break;
      case Buf::Recv: size = R_; break;
      case Buf::Scratch: size = s_.ranks[static_cast<size_t>(r)].scratch_count; break;
      default: return fail_step(r, i, st, "invalid buffer");
    }
    if (rg.offset > size || rg.count > size - rg.offset)
      return fail_step(r, i, st,
                       "out of bounds: " + std::string(buf_name(rg.buf)) + " has " + std::to_string(size) +
                           " elements");
    if (write && rg.buf == Buf::Send) return fail_step(r, i, st, "writes the Send buffer, which is input only");
    if (rg.buf == Buf::Recv && a_.coll == Coll::Reduce && r != a_.root)
      return fail_step(r, i, st, "uses the Recv buffer, which only the root has in reduce");
    const Mem& m = mem_[static_cast<size_t>(r)];
    if (rg.buf == Buf::Scratch) {
      *loc = {1, rg.offset, rg.offset + rg.count};
    } else {
      const uint64_t base = rg.buf == Buf::Send ? m.send_base : m.recv_base;
      *loc = {0, base + rg.offset, base + rg.offset + rg.count};
    }
    return Status::Ok();
  }

  Val* at(int r, const Loc& l) {
    Mem& m = mem_[static_cast<size_t>(r)];
    return (l.array == 0 ? m.user.data() : m.scratch.data()) + l.begin;
  }

  Status check_defined(int r, size_t i, const Step& st, const Range& rg, const Loc& l) {
    const Val* v = at(r, l);
    for (uint64_t k = 0; k < rg.count; ++k)
      if (!v[k].defined())
        return fail_step(r, i, st, "reads undefined data at " + elem_str(rg.buf, rg.offset + k));
    return Status::Ok();
  }

  // dst[k] = a[k] op b[k]: the same result element, disjoint contributor sets.
  // `a` may be dst itself. The loop is the verifier's hot path, so it builds a
  // Status only on failure.
  Status combine(int r, size_t i, const Step& st, const Range& dst, const Range& a_range, const Val* a,
                 const Val* b, Val* d) {
    for (uint64_t k = 0; k < dst.count; ++k) {
      const Val x = a[k], y = b[k];
      if (!x.defined() || !y.defined() || x.idx != y.idx || (x.mask & y.mask))
        return combine_error(r, i, st, dst, a_range, k, x, y);
      d[k] = {x.idx, x.mask | y.mask};
    }
    return Status::Ok();
  }

  Status combine_error(int r, size_t i, const Step& st, const Range& dst, const Range& a_range, uint64_t k,
                       const Val& x, const Val& y) {
    if (!x.defined()) return fail_step(r, i, st, "reads undefined data at " + elem_str(a_range.buf, a_range.offset + k));
    if (!y.defined()) return fail_step(r, i, st, "reads undefined data at element " + std::to_string(k) + " of the other operand");
    if (x.idx != y.idx)
      return fail_step(r, i, st,
                       "mixed elements at " + elem_str(dst.buf, dst.offset + k) + ": " + val_str(x) + " op " +
                           val_str(y));
    return fail_step(r, i, st,
                     "double contribution at " + elem_str(dst.buf, dst.offset + k) + ": " + val_str(x) + " op " +
                         val_str(y) + " repeats ranks " + mask_str(x.mask & y.mask));
  }

  static bool overlap(const Loc& a, const Loc& b) {
    return a.array == b.array && a.begin < b.end && b.begin < a.end;
  }
  static bool same(const Loc& a, const Loc& b) {
    return a.array == b.array && a.begin == b.begin && a.end == b.end;
  }

  // Done: the step completed. Staged: a receive took its message but must wait
  // before writing. Blocked: nothing happened.
  enum class Outcome { Done, Staged, Blocked };

  size_t pair(int from, int to) const { return static_cast<size_t>(from * n_ + to); }

  // The executor's rendezvous rule: a rank about to write memory that one of its
  // own sends still reads waits until the peer has received that send. Returns
  // the earliest such undelivered send, or nullptr; forgets delivered ones.
  const InFlight* blocking_send(int r, const Loc& dst) {
    auto& list = inflight_[static_cast<size_t>(r)];
    const InFlight* hit = nullptr;
    size_t keep = 0;
    for (size_t k = 0; k < list.size(); ++k) {
      if (recvd_[pair(r, list[k].peer)] > list[k].seq) continue;  // delivered
      list[keep++] = list[k];
    }
    list.resize(keep);
    for (const InFlight& f : list)
      if (overlap(f.loc, dst)) {
        hit = &f;
        break;
      }
    return hit;
  }

  Status exec(int r, size_t i, const Step& st, Outcome* out) {
    *out = Outcome::Done;
    const bool peered = st.kind == Kind::Send || st.kind == Kind::Recv || st.kind == Kind::RecvReduce;
    if (peered && (st.peer < 0 || st.peer >= n_ || st.peer == r))
      return fail_step(r, i, st, "invalid peer " + std::to_string(st.peer));
    Loc dl{}, sl{};
    switch (st.kind) {
      case Kind::Send: {
        WEFT_TRY(locate(r, i, st, st.src, false, &sl));
        WEFT_TRY(check_defined(r, i, st, st.src, sl));
        Fifo& f = fifo(r, st.peer);
        const Val* v = at(r, sl);
        f.msgs.push_back({f.data.size(), st.src.count, i});
        f.data.insert(f.data.end(), v, v + st.src.count);
        inflight_[static_cast<size_t>(r)].push_back({sl, st.peer, sent_[pair(r, st.peer)]++, i});
        return Status::Ok();
      }
      case Kind::Recv:
      case Kind::RecvReduce: {
        WEFT_TRY(locate(r, i, st, st.dst, true, &dl));
        const bool reduce = st.kind == Kind::RecvReduce;
        if (reduce) {
          WEFT_TRY(locate(r, i, st, st.src, false, &sl));
          if (st.src.count != st.dst.count) return fail_step(r, i, st, "src and dst counts differ");
          if (overlap(sl, dl) && !same(sl, dl)) return fail_step(r, i, st, "src and dst overlap partially");
        }
        Stage& sg = stage_[static_cast<size_t>(r)];
        const bool staged_before = sg.full;
        if (!sg.full) {
          Fifo& f = fifo(st.peer, r);
          if (f.empty()) {
            *out = Outcome::Blocked;
            return Status::Ok();
          }
          const Fifo::Hdr& m = f.msgs[f.head++];
          ++recvd_[pair(st.peer, r)];
          if (m.count != st.dst.count)
            return fail_step(r, i, st,
                             "count mismatch: receives " + std::to_string(st.dst.count) + " elements but rank " +
                                 std::to_string(st.peer) + " step " + std::to_string(m.step) + " sends " +
                                 std::to_string(m.count));
          sg.data.assign(f.data.begin() + static_cast<long>(m.begin),
                         f.data.begin() + static_cast<long>(m.begin + m.count));
          sg.full = true;
          if (f.empty()) f.clear();  // everything sent so far was received: reuse the arena
        }
        // Like the executor, take the message first (into staging), then wait for
        // our own sends that still read the destination.
        if (blocking_send(r, dl)) {
          *out = staged_before ? Outcome::Blocked : Outcome::Staged;
          return Status::Ok();
        }
        sg.full = false;
        Val* d = at(r, dl);
        if (reduce) {
          // src and dst are the same memory or disjoint, so element-wise is safe.
          WEFT_TRY(combine(r, i, st, st.dst, st.src, at(r, sl), sg.data.data(), d));
        } else {
          std::copy(sg.data.begin(), sg.data.end(), d);
        }
        return Status::Ok();
      }
      case Kind::Copy: {
        WEFT_TRY(locate(r, i, st, st.dst, true, &dl));
        WEFT_TRY(locate(r, i, st, st.src, false, &sl));
        if (st.src.count != st.dst.count) return fail_step(r, i, st, "src and dst counts differ");
        if (same(sl, dl)) return Status::Ok();  // in-place no-op; the executor skips it too
        if (overlap(sl, dl)) return fail_step(r, i, st, "src and dst overlap partially");
        if (blocking_send(r, dl)) {
          *out = Outcome::Blocked;
          return Status::Ok();
        }
        WEFT_TRY(check_defined(r, i, st, st.src, sl));
        const Val* sv = at(r, sl);
        std::copy(sv, sv + st.src.count, at(r, dl));
        return Status::Ok();
      }
      case Kind::Reduce: {
        WEFT_TRY(locate(r, i, st, st.dst, true, &dl));
        WEFT_TRY(locate(r, i, st, st.src, false, &sl));
        if (st.src.count != st.dst.count) return fail_step(r, i, st, "src and dst counts differ");
        if (overlap(sl, dl)) return fail_step(r, i, st, "src and dst overlap");
        if (blocking_send(r, dl)) {
          *out = Outcome::Blocked;
          return Status::Ok();
        }
        WEFT_TRY(check_defined(r, i, st, st.src, sl));
        Val* d = at(r, dl);
        return combine(r, i, st, st.dst, st.dst, d, at(r, sl), d);
      }
    }
    return fail_step(r, i, st, "invalid step kind");
  }

  Status deadlock(const std::vector<size_t>& pc) {
    std::string what = "deadlock: no rank can progress;";
    int listed = 0, blocked = 0;
    for (int r = 0; r < n_; ++r) {
      const auto& steps = s_.ranks[static_cast<size_t>(r)].steps;
      const size_t i = pc[static_cast<size_t>(r)];
      if (i >= steps.size()) continue;
      ++blocked;
      if (listed++ >= 8) continue;
      const Step& st = steps[i];
      what += " rank " + std::to_string(r) + " waits at step " + std::to_string(i) + " (" + to_string(st) + ")";
      // Not a message wait: a write waiting for one of our sends to be received.
      Loc dl{};
      const Range& dst = st.dst;
      const InFlight* f = nullptr;
      if (st.kind != Kind::Send && dst.buf == Buf::Scratch) dl = {1, dst.offset, dst.offset + dst.count};
      else if (st.kind != Kind::Send) {
        const Mem& m = mem_[static_cast<size_t>(r)];
        const uint64_t base = dst.buf == Buf::Send ? m.send_base : m.recv_base;
        dl = {0, base + dst.offset, base + dst.offset + dst.count};
      }
      const bool staged = stage_[static_cast<size_t>(r)].full;
      const bool msg_wait = (st.kind == Kind::Recv || st.kind == Kind::RecvReduce) && !staged;
      if (!msg_wait && st.kind != Kind::Send) f = blocking_send(r, dl);
      if (f)
        what += " until rank " + std::to_string(f->peer) + " receives its step " + std::to_string(f->step) +
                " send, which reads the memory this step writes";
      what += ";";
    }
    if (listed > 8) what += " and " + std::to_string(blocked - 8) + " more blocked ranks";
    return fail(what);
  }

  Status check_leftovers() const {
    for (int a = 0; a < n_; ++a)
      for (int b = 0; b < n_; ++b) {
        const Fifo& f = fifos_[static_cast<size_t>(a * n_ + b)];
        if (!f.empty()) {
          const Fifo::Hdr& m = f.msgs[f.head];
          return fail("message left unreceived: rank " + std::to_string(a) + " step " + std::to_string(m.step) +
                      " sent " + std::to_string(m.count) + " elements to rank " + std::to_string(b) +
                      ", which never receives them (" + std::to_string(f.msgs.size() - f.head) + " pending)");
        }
      }
    return Status::Ok();
  }

  Status check_results() const {
    for (int r = 0; r < n_; ++r) {
      const Mem& m = mem_[static_cast<size_t>(r)];
      for (uint64_t i = 0; i < R_; ++i) {
        Val want;
        if (!expected(r, i, &want)) break;
        const Val& got = m.user[m.recv_base + i];
        if (!(got == want))
          return fail("wrong result: rank " + std::to_string(r) + " " + elem_str(Buf::Recv, i) + " holds " +
                      val_str(got) + " but should hold " + val_str(want));
      }
    }
    return Status::Ok();
  }

  const Schedule& s_;
  const BuildArgs& a_;
  const bool in_place_;
  const int n_;
  uint64_t S_ = 0, R_ = 0;
  // Reused across calls on a thread: the unit tests verify thousands of
  // schedules, and reallocating n*n FIFOs each time dominated their run time.
  std::vector<std::vector<InFlight>> inflight_;
  std::vector<Stage> stage_;
  std::vector<uint64_t> sent_, recvd_;  // per (from, to) pair
  std::vector<Mem>& mem_ = tls_mem();
  std::vector<Fifo>& fifos_ = tls_fifos();
  static std::vector<Mem>& tls_mem() {
    thread_local std::vector<Mem> m;
    return m;
  }
  static std::vector<Fifo>& tls_fifos() {
    thread_local std::vector<Fifo> f;
    return f;
  }
};

}  // namespace

Status verify(const Schedule& schedule, bool in_place) { return Sim(schedule, in_place).run(); }

Status verify_both(const Schedule& schedule) {
  WEFT_TRY(verify(schedule, false));
  return verify(schedule, true);
}

}  // namespace weft::sched
