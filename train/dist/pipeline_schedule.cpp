#include "train/dist/pipeline_schedule.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <tuple>

namespace weft::train::pp {

const char* op_name(Op op) {
  switch (op) {
    case Op::Forward: return "F";
    case Op::Backward: return "B";
    case Op::InputGrad: return "I";
    case Op::WeightGrad: return "W";
    case Op::SendAct: return "send-activation";
    case Op::RecvAct: return "recv-activation";
    case Op::SendGrad: return "send-gradient";
    case Op::RecvGrad: return "recv-gradient";
  }
  return "?";
}

namespace {

// Appends a stage's compute actions with the transfers around them.
class Builder {
 public:
  Builder(std::string name, int stages, int microbatches, int chunks) {
    s_.name = std::move(name);
    s_.stages = stages;
    s_.microbatches = microbatches;
    s_.chunks = chunks;
    s_.actions.resize(static_cast<size_t>(std::max(stages, 0)));
  }
  void forward(int st, int mb, int chunk) {
    const int vs = chunk * s_.stages + st;
    if (vs > 0) add(st, Op::RecvAct, mb, chunk);
    add(st, Op::Forward, mb, chunk);
    if (vs < last()) add(st, Op::SendAct, mb, chunk);
  }
  // op: Backward, or InputGrad (its W comes separately).
  void backward(int st, int mb, int chunk, Op op) {
    const int vs = chunk * s_.stages + st;
    if (vs < last()) add(st, Op::RecvGrad, mb, chunk);
    add(st, op, mb, chunk);
    if (vs > 0) add(st, Op::SendGrad, mb, chunk);
  }
  void weight(int st, int mb, int chunk) { add(st, Op::WeightGrad, mb, chunk); }
  Schedule take() { return std::move(s_); }

 private:
  int last() const { return s_.stages * s_.chunks - 1; }
  void add(int st, Op op, int mb, int chunk) { s_.actions[static_cast<size_t>(st)].push_back({op, mb, chunk}); }
  Schedule s_;
};

}  // namespace

Schedule gpipe(int stages, int microbatches) {
  Builder b("gpipe", stages, microbatches, 1);
  for (int s = 0; s < stages; ++s) {
    for (int m = 0; m < microbatches; ++m) b.forward(s, m, 0);
    for (int m = 0; m < microbatches; ++m) b.backward(s, m, 0, Op::Backward);
  }
  return b.take();
}

namespace {

// PipeDream-Flush's order: P - s - 1 warm-up forwards, one forward one backward,
// then the remaining backwards. split (ZB-H1): each backward as I then W; in the
// cool-down the I's run first (the critical path to stage 0) and each W after
// the next I, where the stage would otherwise wait for that I's gradient.
Schedule flush_order(const char* name, int stages, int microbatches, bool split) {
  Builder b(name, stages, microbatches, 1);
  const Op back = split ? Op::InputGrad : Op::Backward;
  for (int s = 0; s < stages; ++s) {
    const int warmup = std::min(stages - 1 - s, microbatches);
    for (int m = 0; m < warmup; ++m) b.forward(s, m, 0);
    for (int i = 0; i < microbatches - warmup; ++i) {
      b.forward(s, warmup + i, 0);
      b.backward(s, i, 0, back);
      if (split) b.weight(s, i, 0);
    }
    for (int m = microbatches - warmup; m < microbatches; ++m) {
      b.backward(s, m, 0, back);
      if (split && m > microbatches - warmup) b.weight(s, m - 1, 0);
    }
    if (split && warmup > 0) b.weight(s, microbatches - 1, 0);
  }
  return b.take();
}

}  // namespace

Schedule one_f_one_b(int stages, int microbatches) { return flush_order("1f1b", stages, microbatches, false); }

Schedule zero_bubble_h1(int stages, int microbatches) { return flush_order("zb-h1", stages, microbatches, true); }

Schedule interleaved(int stages, int microbatches, int chunks) {
  Builder b("interleaved", stages, microbatches, chunks);
  // Megatron's order: forward step k runs micro-batch mb(k) on chunk (k / P) % v,
  // P micro-batches per chunk in turn; backward step k the same micro-batch on
  // the chunks in reverse.
  const int P = stages, v = chunks, total = microbatches * chunks;
  auto mb = [&](int k) { return k / (P * v) * P + k % P; };
  auto fchunk = [&](int k) { return k / P % v; };
  auto bchunk = [&](int k) { return v - 1 - k / P % v; };
  for (int s = 0; s < P; ++s) {
    const int warmup = std::min((P - s - 1) * 2 + (v - 1) * P, total);
    for (int k = 0; k < warmup; ++k) b.forward(s, mb(k), fchunk(k));
    for (int k = 0; k < total - warmup; ++k) {
      b.forward(s, mb(warmup + k), fchunk(warmup + k));
      b.backward(s, mb(k), bchunk(k), Op::Backward);
    }
    for (int k = total - warmup; k < total; ++k) b.backward(s, mb(k), bchunk(k), Op::Backward);
  }
  return b.take();
}

double Execution::bubble() const {
  if (step_time <= 0 || busy.empty()) return 0;
  double total = 0;
  for (double b : busy) total += b;
  return 1 - total / (step_time * static_cast<double>(busy.size()));
}

double bubble_formula(int stages, int microbatches, int chunks) {
  return static_cast<double>(stages - 1) / (static_cast<double>(chunks) * microbatches + stages - 1);
}

namespace {

// The symbolic executor behind run(): stages advance in passes, each as far as
// its receives allow; a pass with no progress while work remains is a deadlock.
class Executor {
 public:
  Executor(const Schedule& s, const Costs& c) : s_(s), c_(c) {
    const auto P = static_cast<size_t>(s.stages);
    st_.resize(P);
    for (auto& st : st_) st.flags.assign(static_cast<size_t>(s.microbatches * s.chunks), 0);
    run_.busy.assign(P, 0);
    run_.peak_activations.assign(P, 0);
  }

  Execution go() {
    if (s_.stages < 1 || s_.microbatches < 1 || s_.chunks < 1 ||
        s_.actions.size() != static_cast<size_t>(s_.stages))
      return fail("a schedule needs stages, micro-batches and chunks >= 1 and one action list per stage");
    for (bool progress = true; progress;) {
      progress = false;
      for (int st = 0; st < s_.stages; ++st) {
        bool moved = false;
        if (!advance(st, &moved)) return run_;
        progress |= moved;
      }
    }
    for (int st = 0; st < s_.stages; ++st)
      if (pc(st) < s_.actions[static_cast<size_t>(st)].size()) return deadlock();
    return finish();
  }

 private:
  enum Flag : uint8_t { kRecvAct = 1, kF = 2, kRecvGrad = 4, kB = 8, kI = 16, kW = 32 };
  struct Msg {
    int mb, from_vs;
    double ready;
  };
  struct Stage {
    size_t pc = 0;
    double t = 0;
    int held = 0;
    std::vector<uint8_t> flags;  // per (mb, chunk)
  };

  size_t pc(int st) const { return st_[static_cast<size_t>(st)].pc; }
  int vstage(int st, int chunk) const { return chunk * s_.stages + st; }
  int last() const { return s_.stages * s_.chunks - 1; }

  Execution fail(const std::string& why) {
    run_.error = why;
    return run_;
  }
  std::string where(int st, const Action& a) const {
    char buf[160];
    std::snprintf(buf, sizeof buf, "stage %d, action %zu (%s of micro-batch %d, chunk %d)", st, pc(st),
                  op_name(a.op), a.mb, a.chunk);
    return buf;
  }

  // Runs stage st's actions until a receive must wait; false on an error.
  bool advance(int st, bool* moved) {
    Stage& S = st_[static_cast<size_t>(st)];
    const auto& list = s_.actions[static_cast<size_t>(st)];
    while (S.pc < list.size()) {
      const Action& a = list[S.pc];
      bool ready = true;
      std::string err = step(st, a, &ready);
      if (!err.empty()) {
        fail(where(st, a) + ": " + err);
        return false;
      }
      if (!ready) return true;
      ++S.pc;
      *moved = true;
    }
    return true;
  }

  std::string step(int st, const Action& a, bool* ready) {
    if (a.mb < 0 || a.mb >= s_.microbatches || a.chunk < 0 || a.chunk >= s_.chunks)
      return "micro-batch or chunk out of range";
    Stage& S = st_[static_cast<size_t>(st)];
    uint8_t& f = S.flags[static_cast<size_t>(a.mb * s_.chunks + a.chunk)];
    const int vs = vstage(st, a.chunk);
    const double share = 1.0 / s_.chunks;
    auto compute = [&](double cost) {
      S.t += cost * share;
      run_.busy[static_cast<size_t>(st)] += cost * share;
    };
    switch (a.op) {
      case Op::Forward:
        if (f & kF) return "a second forward";
        if (vs > 0 && !(f & kRecvAct)) return "forward before its activation was received";
        f |= kF;
        compute(c_.forward);
        S.held += 1;
        run_.peak_activations[static_cast<size_t>(st)] = std::max(run_.peak_activations[static_cast<size_t>(st)], S.held);
        return "";
      case Op::Backward:
      case Op::InputGrad:
        if (f & (kB | kI)) return "a second backward";
        if (!(f & kF)) return "backward before its forward";
        if (vs < last() && !(f & kRecvGrad)) return "backward before its gradient was received";
        f |= a.op == Op::Backward ? kB : kI;
        compute(a.op == Op::Backward ? c_.backward : c_.input_grad);
        if (a.op == Op::Backward) S.held -= 1;
        return "";
      case Op::WeightGrad:
        if (f & (kW | kB)) return "a second weight gradient";
        if (!(f & kI)) return "weight gradient before its input gradient";
        f |= kW;
        compute(c_.weight_grad);
        S.held -= 1;
        return "";
      case Op::SendAct:
        if (vs == last()) return "the last virtual stage has nobody to send activations to";
        if (!(f & kF)) return "sends an activation it has not computed";
        chan(st, (vs + 1) % s_.stages, false).push_back({a.mb, vs, S.t + c_.transfer});
        return "";
      case Op::SendGrad:
        if (vs == 0) return "the first virtual stage has nobody to send gradients to";
        if (!(f & (kB | kI))) return "sends a gradient it has not computed";
        chan(st, (vs - 1 + s_.stages) % s_.stages, true).push_back({a.mb, vs, S.t + c_.transfer});
        return "";
      case Op::RecvAct:
      case Op::RecvGrad: {
        const bool grad = a.op == Op::RecvGrad;
        if (grad ? vs == last() : vs == 0) return "nothing ever sends that";
        if (f & (grad ? kRecvGrad : kRecvAct)) return "a second receive";
        const int from_vs = grad ? vs + 1 : vs - 1;
        auto& q = chan(from_vs % s_.stages, st, grad);
        if (q.empty()) {
          *ready = false;
          return "";
        }
        const Msg m = q.front();
        if (m.mb != a.mb || m.from_vs != from_vs) {
          char buf[200];
          std::snprintf(buf, sizeof buf,
                        "receives out of order: the next %s from stage %d is micro-batch %d of virtual stage %d, not "
                        "micro-batch %d of virtual stage %d",
                        grad ? "gradient" : "activation", from_vs % s_.stages, m.mb, m.from_vs, a.mb, from_vs);
          return buf;
        }
        q.pop_front();
        S.t = std::max(S.t, m.ready);
        f |= grad ? kRecvGrad : kRecvAct;
        return "";
      }
    }
    return "unknown action";
  }

  std::deque<Msg>& chan(int from, int to, bool grad) { return chans_[{from, to, grad}]; }

  Execution deadlock() {
    std::string why = "deadlock: ";
    for (int st = 0; st < s_.stages; ++st) {
      const auto& list = s_.actions[static_cast<size_t>(st)];
      if (pc(st) < list.size()) why += where(st, list[pc(st)]) + " waits; ";
    }
    why += "nothing it waits for is ever sent before it";
    return fail(why);
  }

  Execution finish() {
    for (int st = 0; st < s_.stages; ++st)
      for (int c = 0; c < s_.chunks; ++c)
        for (int m = 0; m < s_.microbatches; ++m) {
          uint8_t f = st_[static_cast<size_t>(st)].flags[static_cast<size_t>(m * s_.chunks + c)];
          const char* missing = !(f & kF)                       ? "forward"
                                : !(f & kB) && !(f & kI)         ? "backward"
                                : (f & kI) && !(f & kW)          ? "weight gradient"
                                                                 : nullptr;
          if (missing != nullptr) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "stage %d never runs the %s of micro-batch %d, chunk %d", st, missing, m, c);
            return fail(buf);
          }
        }
    for (const auto& [key, q] : chans_)
      if (!q.empty()) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "stage %d sends %s of micro-batch %d that stage %d never receives",
                      std::get<0>(key), std::get<2>(key) ? "a gradient" : "an activation", q.front().mb,
                      std::get<1>(key));
        return fail(buf);
      }
    for (const Stage& S : st_) run_.step_time = std::max(run_.step_time, S.t);
    return run_;
  }

  const Schedule& s_;
  const Costs& c_;
  std::vector<Stage> st_;
  std::map<std::tuple<int, int, bool>, std::deque<Msg>> chans_;  // (from stage, to stage, gradient)
  Execution run_;
};

}  // namespace

Execution run(const Schedule& s, const Costs& costs) { return Executor(s, costs).go(); }

}  // namespace weft::train::pp
