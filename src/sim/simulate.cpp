#include "sim/simulate.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

namespace weft::sim {

using sched::Kind;
using sched::Step;

namespace {

// A port of `lanes` parallel lanes; each remembers when it is next free.
struct Lanes {
  std::vector<double> free_at;
  double s_per_byte = 0;  // per lane; 0: unlimited
  // Token bucket (Port::burst_bytes), shared by the lanes: tokens saved up by
  // tokens_at, refilled at 1 / refill_s_per_byte.
  double burst = 0, line_s_per_byte = 0, refill_s_per_byte = 0;
  double tokens = 0, tokens_at = 0;

  double* earliest() { return &*std::min_element(free_at.begin(), free_at.end()); }
  bool bucket() const { return burst > 0; }
  double tokens_by(double t) const { return std::min(burst, tokens + std::max(0.0, t - tokens_at) / refill_s_per_byte); }
  // Seconds to pass `bytes` from `start`: at line rate while the tokens last (they
  // keep refilling meanwhile), the rest at the lane's sustained rate.
  double pass(double bytes, double start) {
    const double have = tokens_by(start);
    const double spent_per_byte = 1 - line_s_per_byte / refill_s_per_byte;
    if (spent_per_byte <= 0) return bytes * s_per_byte;  // the line is no faster: no burst
    const double fast = std::min(bytes, have / spent_per_byte);
    const double seconds = fast * line_s_per_byte + (bytes - fast) * s_per_byte;
    tokens = fast < bytes ? 0.0 : have - fast * spent_per_byte;
    tokens_at = start + seconds;
    return seconds;
  }
};

Lanes shared_port(const Port& p, double own_beta) {
  Lanes l;
  if (p.bytes_per_s == 0) return l;
  if (p.bytes_per_s < 0) {
    l.free_at.assign(1, 0.0);
    l.s_per_byte = own_beta;
  } else {
    const double own = own_beta > 0 ? 1 / own_beta : p.bytes_per_s;
    const int lanes = std::max(1, static_cast<int>(p.bytes_per_s / own + 1e-9));
    l.free_at.assign(static_cast<size_t>(lanes), 0.0);
    l.s_per_byte = lanes / p.bytes_per_s;
  }
  if (p.burst_bytes > 0 && l.s_per_byte > 0) {
    l.burst = l.tokens = p.burst_bytes;
    l.line_s_per_byte = 1 / p.line_bytes_per_s;
    l.refill_s_per_byte = p.bytes_per_s > 0 ? 1 / p.bytes_per_s : own_beta;
  }
  return l;
}

struct Message {
  double arrival;  // of what went when sent (the whole message, or its eager part)
  uint64_t count;
  uint64_t later_bytes = 0;  // the rest, which goes once the receiver is there
  double sent_at = 0;
};

// In-flight messages of one ordered pair of ranks, oldest first.
struct Channel {
  std::vector<Message> q;
  size_t head = 0;
};

struct RankState {
  size_t step = 0;
  double t = 0;
  int waiting_on = -1;          // peer whose message it waits for, or -1
  std::vector<double> done_at;  // when it finished each call
};

class Sim {
 public:
  // `calls` back to back, each starting once every rank has finished the one
  // before; buckets start full, or empty where `drained`.
  Sim(const sched::Schedule& s, const Fabric& f, size_t elem_size, size_t calls, bool drained)
      : s_(s), f_(f), elem_(elem_size), calls_(calls) {
    const size_t n = static_cast<size_t>(f.nranks);
    ranks_.resize(n);
    egress_.assign(n * kLevels, 0.0);
    ingress_.assign(n * kLevels, 0.0);
    for (const Port& p : f.nics) nics_out_.push_back(shared_port(p, f.cost[2].beta_s_per_byte));
    // A token bucket shapes what its host sends (tc's tbf on the host's
    // interface); what the host receives passes at the line rate.
    nics_in_ = nics_out_;
    for (Lanes& l : nics_in_)
      if (l.bucket()) l.s_per_byte = l.line_s_per_byte * static_cast<double>(l.free_at.size()), l.burst = 0;
    if (drained)
      for (std::vector<Lanes>* ports : {&nics_out_, &nics_in_})
        for (Lanes& l : *ports) l.tokens = 0;
    call_tokens_.assign(calls, std::vector<double>(nics_out_.size() * 2, -1.0));
    for (const Lanes& l : nics_out_) tokens_scale_ = std::max(tokens_scale_, l.burst);
    for (const Port& p : f.cross_domain) cross_.push_back(shared_port(p, f.cost[1].beta_s_per_byte));
    // Counted here rather than by Fabric::oversubscribed per rank, which is
    // quadratic at thousands of ranks.
    std::vector<int> ranks_on(f.machine_cores.size(), 0);
    for (int m : f.machine) ++ranks_on[size_t(m)];
    for (int cores : f.machine_cores) cores_.push_back(std::vector<double>(size_t(cores), 0.0));
    for (int m : f.machine) shared_cores_.push_back(ranks_on[size_t(m)] > f.machine_cores[size_t(m)]);
    if (f.machine.empty()) shared_cores_.assign(n, false);
  }

  Status run(Result* out) {
    for (int r = 0; r < f_.nranks; ++r) ready_.push({0.0, r});
    while (!ready_.empty()) {
      const auto [t, r] = ready_.top();
      ready_.pop();
      RankState& st = ranks_[static_cast<size_t>(r)];
      st.t = std::max(st.t, t);
      WEFT_TRY(advance(r));
    }
    for (int r = 0; r < f_.nranks; ++r) {
      const RankState& st = ranks_[static_cast<size_t>(r)];
      if (st.done_at.size() < calls_)
        return Error(weftInternalError, "%s: simulated deadlock: rank %d waits at step %zu for a message from rank %d",
                     s_.algo.c_str(), r, st.step, st.waiting_on);
    }
    for (const auto& [key, ch] : channels_)
      if (ch.head != ch.q.size())
        return Error(weftInternalError, "%s: rank %d sent rank %d a message nobody received", s_.algo.c_str(),
                     static_cast<int>(key >> 32), static_cast<int>(key & 0xffffffffu));
    // One call: the whole run; back to back: a call of the second half (the
    // first calls may still spend tokens saved before them).
    const size_t from = calls_ / 2;
    double last = 0, before = 0;
    out->rank_seconds.resize(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const std::vector<double>& d = ranks_[r].done_at;
      out->rank_seconds[r] = (d.back() - (from > 0 ? d[from - 1] : 0.0)) / double(calls_ - from);
      last = std::max(last, d.back());
      if (from > 0) before = std::max(before, d[from - 1]);
    }
    out->seconds = (last - before) / double(calls_ - from);
    out->messages = messages_ / calls_;
    for (size_t l = 0; l < kLevels; ++l) out->bytes[l] = bytes_[l] / calls_;
    return Status::Ok();
  }

  // Whether some bucket held fewer tokens when the last call began than when the
  // second half began: the calls spend more than the refill, so the back-to-back
  // state is an empty bucket, not the full one the run started from.
  bool draining() const {
    const size_t from = calls_ / 2;
    for (size_t i = 0; i < call_tokens_[0].size(); ++i) {
      const double then = call_tokens_[from][i], now = call_tokens_.back()[i];
      if (then >= 0 && now >= 0 && now < then - 1e-3 * tokens_scale_) return true;
    }
    return false;
  }

 private:
  using Event = std::pair<double, int>;  // (time, rank), earliest first
  const sched::Schedule& s_;
  const Fabric& f_;
  size_t elem_;
  size_t calls_;
  size_t finished_ = 0;  // ranks that have finished the current call
  static constexpr int kAtCallEnd = -2;
  // Per call: each bucket's tokens when the first message of that call reached it
  // (out-ports, then in-ports); what draining() compares.
  std::vector<std::vector<double>> call_tokens_;
  double tokens_scale_ = 0;
  std::vector<RankState> ranks_;
  std::vector<double> egress_, ingress_;  // each rank's own port per level, one lane each way
  std::vector<Lanes> nics_out_, nics_in_, cross_;
  std::vector<std::vector<double>> cores_;  // per machine, when each core is next free
  std::vector<bool> shared_cores_;          // per rank: its machine has fewer cores than ranks
  std::unordered_map<uint64_t, Channel> channels_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> ready_;
  uint64_t messages_ = 0;
  std::array<uint64_t, kLevels> bytes_{};

  static uint64_t key(int from, int to) { return (uint64_t(uint32_t(from)) << 32) | uint32_t(to); }

  // CPU time rank r's side of a message on level lv takes from a core of its machine.
  double overhead(int r, Level lv) const {
    return shared_cores_[size_t(r)] ? f_.cpu_share * f_.cost[static_cast<size_t>(lv)].alpha_s : 0.0;
  }
  // Rank r works `seconds` from t: on the earliest free core of its machine where
  // its ranks share the cores, else on its own. Returns when the work is done.
  double compute(int r, double t, double seconds) {
    if (!shared_cores_[size_t(r)] || seconds == 0) return t + seconds;
    std::vector<double>& cores = cores_[size_t(f_.machine[size_t(r)])];
    double* core = &*std::min_element(cores.begin(), cores.end());
    *core = std::max(*core, t) + seconds;
    return *core;
  }

  // Queues a message of `bytes` from a to b, sent at t, on every port it crosses;
  // returns when the last of them has carried it.
  double transfer(int a, int b, uint64_t bytes, double t) {
    const Level lv = f_.level(a, b);
    const algo::LinkCost& c = f_.cost[static_cast<size_t>(lv)];
    const size_t li = static_cast<size_t>(lv);
    double* own[2] = {&egress_[size_t(a) * kLevels + li], &ingress_[size_t(b) * kLevels + li]};
    Lanes* shared[2] = {nullptr, nullptr};
    size_t bucket_index[2] = {0, 0};  // into call_tokens_'s rows
    auto cross = [&](Lanes& l, int slot) {
      if (!l.free_at.empty()) shared[slot] = &l;
    };
    if (lv == Level::Network) {
      const int na = f_.nic[size_t(a)], nb = f_.nic[size_t(b)];
      if (na >= 0) cross(nics_out_[size_t(na)], 0), bucket_index[0] = size_t(na);
      if (nb >= 0) cross(nics_in_[size_t(nb)], 1), bucket_index[1] = nics_out_.size() + size_t(nb);
    } else if (lv == Level::Host && !cross_.empty()) {
      cross(cross_[size_t(f_.host[size_t(a)])], 0);
    }
    // Where a token bucket paces the bytes, the level's beta is its sustained rate
    // and the ranks' own ports move them at the line rate.
    double beta = 0;
    for (const Lanes* l : shared)
      if (l && l->bucket()) beta = std::max(beta, l->line_s_per_byte);
    if (beta == 0) beta = c.beta_s_per_byte;
    for (const Lanes* l : shared)
      if (l && !l->bucket()) beta = std::max(beta, l->s_per_byte);
    // The sender's and the receiver's CPU time, where it is modelled, is not the link's.
    const double alpha = std::max(0.0, c.alpha_s - overhead(a, lv) - overhead(b, lv));
    const double n = static_cast<double>(bytes);
    double end = t;
    for (double* p : own) {
      *p = std::max(t, *p) + alpha + n * beta;
      end = std::max(end, *p);
    }
    for (int i = 0; i < 2; ++i) {
      Lanes* l = shared[i];
      if (!l) continue;
      double* lane = l->earliest();
      const double start = std::max(t, *lane) + alpha;
      if (l->bucket()) {
        double& first = call_tokens_[std::min(ranks_[size_t(a)].done_at.size(), calls_ - 1)][bucket_index[i]];
        if (first < 0) first = l->tokens_by(start);
      }
      *lane = start + (l->bucket() ? l->pass(n, start) : n * beta);
      end = std::max(end, *lane);
    }
    ++messages_;
    bytes_[static_cast<size_t>(lv)] += bytes;
    return lv == Level::Network ? end + f_.net_wire_s : end;
  }

  Status advance(int r) {
    RankState& st = ranks_[static_cast<size_t>(r)];
    const std::vector<Step>& steps = s_.ranks[static_cast<size_t>(r)].steps;
    st.waiting_on = -1;
    while (st.done_at.size() < calls_) {
      if (st.step == steps.size()) {
        st.done_at.push_back(st.t);
        st.step = 0;
        if (st.done_at.size() == calls_) break;
        // The next call starts when every rank has finished this one: calls do not
        // overlap, as the single-call model assumes.
        if (++finished_ < ranks_.size()) {
          st.waiting_on = kAtCallEnd;
          return Status::Ok();
        }
        finished_ = 0;
        double all_done = 0;
        for (const RankState& o : ranks_) all_done = std::max(all_done, o.done_at.back());
        for (size_t o = 0; o < ranks_.size(); ++o)
          if (int(o) != r) ranks_[o].waiting_on = -1, ready_.push({all_done, int(o)});
        st.t = all_done;
        continue;
      }
      // Ports are claimed in time order: a rank ahead of another pending rank waits its turn.
      if (!ready_.empty() && st.t > ready_.top().first) {
        ready_.push({st.t, r});
        return Status::Ok();
      }
      const Step& s = steps[st.step];
      switch (s.kind) {
        case Kind::Send: {
          const Level lv = f_.level(r, s.peer);
          st.t = compute(r, st.t, overhead(r, lv));
          const uint64_t bytes = s.src.count * elem_;
          const uint64_t now = lv == Level::Network ? std::min(bytes, f_.eager_bytes) : bytes;
          const double arrival = transfer(r, s.peer, now, st.t);
          channels_[key(r, s.peer)].q.push_back({arrival, s.src.count, bytes - now, st.t});
          RankState& peer = ranks_[static_cast<size_t>(s.peer)];
          if (peer.waiting_on == r) {
            peer.waiting_on = -1;
            ready_.push({arrival, s.peer});
          }
          break;
        }
        case Kind::Recv:
        case Kind::RecvReduce: {
          Channel& ch = channels_[key(s.peer, r)];
          if (ch.head == ch.q.size()) {
            st.waiting_on = s.peer;
            return Status::Ok();
          }
          if (Message& w = ch.q[ch.head]; w.later_bytes > 0) {
            // The receiver is here: the rest of the message may go now.
            w.arrival = std::max(w.arrival, transfer(s.peer, r, w.later_bytes, std::max(w.sent_at, st.t)));
            w.later_bytes = 0;
          }
          const Message m = ch.q[ch.head++];
          if (m.count != s.dst.count)
            return Error(weftInternalError, "%s: rank %d step %zu receives %llu elements from rank %d, which sent %llu",
                         s_.algo.c_str(), r, st.step, static_cast<unsigned long long>(s.dst.count), s.peer,
                         static_cast<unsigned long long>(m.count));
          if (m.arrival > st.t) {
            // Not yet here: come back when it is (other ranks may act meanwhile).
            ch.head--;
            ready_.push({m.arrival, r});
            return Status::Ok();
          }
          const Level lv = f_.level(s.peer, r);
          double work = overhead(r, lv);
          if (shared_cores_[size_t(r)] && lv == Level::Network)
            work += static_cast<double>(m.count * elem_) * f_.net_rx_s_per_byte;
          if (s.kind == Kind::RecvReduce)
            work += static_cast<double>(m.count * elem_) * f_.cost[static_cast<size_t>(lv)].gamma_s_per_byte;
          st.t = compute(r, st.t, work);
          break;
        }
        case Kind::Copy: st.t = compute(r, st.t, static_cast<double>(s.dst.count * elem_) * f_.copy_s_per_byte); break;
        case Kind::Reduce:
          st.t = compute(r, st.t, static_cast<double>(s.dst.count * elem_) * f_.cost[0].gamma_s_per_byte);
          break;
      }
      ++st.step;
    }
    return Status::Ok();
  }
};

}  // namespace

Status simulate(const sched::Schedule& s, const Fabric& f, size_t elem_size, Result* out) {
  if (static_cast<int>(s.ranks.size()) != f.nranks || s.args.nranks != f.nranks)
    return Error(weftInvalidArgument, "simulate %s: the schedule has %zu ranks, the fabric %d", s.algo.c_str(),
                 s.ranks.size(), f.nranks);
  const std::string bad = f.check();
  if (!bad.empty()) return Error(weftInvalidArgument, "simulate %s: bad fabric: %s", s.algo.c_str(), bad.c_str());
  if (!f.bursty()) return Sim(s, f, elem_size, 1, false).run(out);
  // A bucket's tokens carry over from call to call, so one call alone says little:
  // calls back to back, as a benchmark or a training step runs them, from a full
  // bucket, and from an empty one where the calls drain it faster than it refills.
  constexpr size_t kCalls = kMaxSimulatedCalls / 2;
  Sim full(s, f, elem_size, kCalls, false);
  WEFT_TRY(full.run(out));
  if (!full.draining()) return Status::Ok();
  return Sim(s, f, elem_size, kCalls, true).run(out);
}

}  // namespace weft::sim
