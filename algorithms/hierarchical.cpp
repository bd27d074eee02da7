#include "algorithms/hierarchical.h"

#include <algorithm>
#include <array>

#include "algorithms/butterfly.h"
#include "algorithms/butterfly_phases.h"
#include "algorithms/ring.h"
#include "algorithms/ring_phases.h"

namespace weft::algo::hierarchical {

using namespace weft::sched;

namespace {
// Ranks per domain: domain_size where it cuts the node, else the whole node.
int domain_of(const BuildArgs& a) {
  return a.domain_size > 0 && a.domain_size < a.local_size ? a.domain_size : a.local_size;
}

// Group size of each level: D ranks per domain, K domains per node, M nodes.
std::array<int, kLevels> group_sizes(const BuildArgs& a) {
  const int D = domain_of(a);
  return {D, a.local_size / D, a.nranks / a.local_size};
}

bool shape_fits(const BuildArgs& a) {
  return a.local_size > 0 && a.nranks % a.local_size == 0 &&
         (a.domain_size <= 0 || a.local_size % a.domain_size == 0);
}

// The last level whose group has more than one rank, -1 if none.
int outermost(const std::array<int, kLevels>& m) {
  for (int l = kLevels - 1; l >= 0; --l)
    if (m[static_cast<size_t>(l)] > 1) return l;
  return -1;
}

bool fits(LevelAlgo algo, int level, const std::array<int, kLevels>& m) {
  const int g = m[static_cast<size_t>(level)];
  if (g <= 1 || algo == LevelAlgo::Ring) return true;
  return power_of_two(g) && (algo == LevelAlgo::Rabenseifner || level == outermost(m));
}

// One level's flat formula: an all-reduce of `count` elements among m ranks.
double level_cost(LevelAlgo algo, int m, uint64_t count, uint64_t slice_elems, size_t elem_size,
                  const LinkCost& c) {
  if (m <= 1) return 0;
  const BuildArgs flat{Coll::AllReduce, m, count, 0, slice_elems};
  switch (algo) {
    case LevelAlgo::Ring: return ring::cost(flat, elem_size, c);
    case LevelAlgo::Rabenseifner: return butterfly::rabenseifner_cost(flat, elem_size, c);
    case LevelAlgo::RecDoubling: return butterfly::recdoubling_cost(flat, elem_size, c);
  }
  return 0;
}

// Elements of level l's share of the vector: count / (the groups inside it).
uint64_t level_count(const BuildArgs& a, const std::array<int, kLevels>& m, int level) {
  uint64_t c = a.count;
  for (int l = 0; l < level; ++l) c /= static_cast<uint64_t>(m[static_cast<size_t>(l)]);
  return c;
}
}  // namespace

bool levels_fit(const BuildArgs& a) {
  if (!shape_fits(a)) return false;
  const auto m = group_sizes(a);
  for (int l = 0; l < kLevels; ++l)
    if (!fits(a.levels[static_cast<size_t>(l)], l, m)) return false;
  return true;
}

bool supports(const BuildArgs& a) { return shape_fits(a) && levels_fit(a); }

// D ranks per domain, K = L / D domains per node of L ranks, M = n / L nodes;
// rank r = (node * K + k) * D + d. Going out, each level reduce-scatters its
// region among its group (ring: member i keeps part (i+1) % m; rabenseifner: part
// i), and the next level works on that part; a recdoubling level all-reduces its
// whole region instead. Coming back, each level all-gathers what it scattered.
// With one domain per node (K = 1) the middle level vanishes: the two-level form.
// Each level costs its flat formula on its group and share of the vector (the
// share rounded down to whole elements):
//   T = level(D ranks, N) + level(K ranks, N/D) + level(M ranks, N/L)
// e.g. a ring level without slices: level(m, B) = 2(m-1)(alpha + B/m beta) + (m-1) B/m gamma;
// rabenseifner: 2 lg(m) alpha + 2 (m-1)/m B beta + (m-1)/m B gamma;
// recdoubling: lg(m) (alpha + B beta + B gamma).
// In R overlapped rounds (BuildArgs::pipeline) the levels' terms overlap where
// they use different links, down to about the largest of them; the formula keeps
// their sum (an upper bound), and the tuner simulates the rounds on the layout.
namespace {
// One rank's groups: its D-rank domain, the node's K domains, the M nodes.
struct Groups {
  std::array<int, kLevels> m;
  std::array<std::vector<int>, kLevels> group;  // real ranks
  std::array<int, kLevels> index;                // this rank's place in each
};

Groups groups_of(const BuildArgs& a, int r) {
  Groups g;
  g.m = group_sizes(a);
  const int L = a.local_size, D = g.m[0], node = r / L, k = r % L / D, d = r % D;
  for (int i = 0; i < D; ++i) g.group[0].push_back(node * L + k * D + i);
  for (int i = 0; i < g.m[1]; ++i) g.group[1].push_back(node * L + i * D + d);
  for (int i = 0; i < g.m[2]; ++i) g.group[2].push_back(i * L + k * D + d);
  g.index = {d, k, node};
  return g;
}

// One level's reduce-scatter (out; recdoubling's all-reduce) or all-gather (back)
// of `region`, reading this rank's operand from `input`.
struct Phase {
  size_t level;
  bool back;
  Part region;
  Buf input;
};

// The phases of an all-reduce of `whole` through the levels, in order.
std::vector<Phase> phases_of(const BuildArgs& a, const Groups& g, Part whole) {
  std::vector<Phase> out;
  Part reg = whole;
  // A rank alone at a level never reduces there: its input is still in Send.
  Buf input = Buf::Send;
  for (size_t l = 0; l < kLevels; ++l) {
    const int m = g.m[l], i = g.index[l];
    if (m <= 1) continue;
    out.push_back({l, false, reg, input});
    input = Buf::Recv;
    if (a.levels[l] != LevelAlgo::RecDoubling) {
      const int owned = a.levels[l] == LevelAlgo::Ring ? mod(i + 1, m) : i;
      Part mine = even_part(reg.count, static_cast<uint64_t>(m), static_cast<uint64_t>(owned));
      mine.offset += reg.offset;
      reg = mine;
    }
  }
  for (size_t p = out.size(); p-- > 0;)
    if (a.levels[out[p].level] != LevelAlgo::RecDoubling) out.push_back({out[p].level, true, out[p].region, Buf::Recv});
  return out;
}

// The phase's steps (`only` >= 0: just its step `only`, unsliced).
void emit(PlanBuilder& b, const BuildArgs& a, const Groups& g, const Phase& p, uint64_t slice_elems, int64_t only) {
  const std::vector<int>& grp = g.group[p.level];
  const int i = g.index[p.level];
  switch (a.levels[p.level]) {
    case LevelAlgo::Ring:
      if (p.back) ring_all_gather(b, grp, i, p.region, slice_elems, only);
      else ring_reduce_scatter(b, grp, i, p.region, p.input, slice_elems, Buf::Recv, only);
      break;
    case LevelAlgo::Rabenseifner:
      if (p.back) doubling_all_gather(b, grp, i, p.region, only);
      else halving_reduce_scatter(b, grp, i, p.region, p.input, only);
      break;
    case LevelAlgo::RecDoubling: doubling_all_reduce(b, grp, i, p.region, p.input, only); break;
  }
}

// Steps of an unsliced phase: a ring's m - 1, a butterfly's lg m.
int64_t steps_of(const BuildArgs& a, const Groups& g, const Phase& p) {
  const int m = g.m[p.level];
  return a.levels[p.level] == LevelAlgo::Ring ? m - 1 : lg_exact(m);
}

// Rounds of the pipeline (the variant that overlaps the levels): pieces of the
// vector whose share per rank at the first level is at least a slice (the sliced
// rings' message), at most kMaxRounds: every round sends its own messages at
// every level, so more rounds pay more latency across nodes for a fill that is
// already short (in weft-sim, 16 x 8 NVLink + IB at 256 MiB: 4482 us in 4 rounds,
// 4394 in 8, 4710 in 16; 6305 unpipelined).
constexpr uint64_t kMaxRounds = 8;
uint64_t pipeline_rounds(const BuildArgs& a) {
  if (a.slice_elems == 0 || a.local_size <= 0) return 1;
  const uint64_t per_round = a.slice_elems * static_cast<uint64_t>(a.local_size);
  return std::max<uint64_t>(1, std::min<uint64_t>(kMaxRounds, a.count / per_round));
}
}  // namespace

RankPlan allreduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  if (a.nranks == 1 || !supports(a)) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  const Groups g = groups_of(a, r);
  const uint64_t R = std::min<uint64_t>(std::max<uint32_t>(a.pipeline, 1), std::max<uint64_t>(a.count, 1));
  if (R <= 1) {
    for (const Phase& p : phases_of(a, g, {0, a.count})) emit(b, a, g, p, a.slice_elems, -1);
    return b.take();
  }
  // Pipelined: round j's phase q runs at time j + q beside the other rounds'
  // phases, step by step, each step's sends first, so one level's links carry
  // one round while another's carry the next. Every rank interleaves in the same
  // order, and a message's receive never comes before its send in that order.
  std::vector<std::vector<Phase>> rounds;
  for (uint64_t j = 0; j < R; ++j) rounds.push_back(phases_of(a, g, even_part(a.count, R, j)));
  const int64_t P = static_cast<int64_t>(rounds[0].size());
  RankPlan plan;
  for (int64_t t = 0; t < static_cast<int64_t>(R) + P - 1; ++t) {
    for (int64_t s = 0;; ++s) {
      bool any = false;
      std::vector<Step> receives;
      for (int64_t q = P - 1; q >= 0; --q) {
        const int64_t j = t - q;
        if (j < 0 || j >= static_cast<int64_t>(R)) continue;
        const Phase& p = rounds[static_cast<size_t>(j)][static_cast<size_t>(q)];
        if (s >= steps_of(a, g, p)) continue;
        any = true;
        PlanBuilder one;
        emit(one, a, g, p, 0, s);
        const RankPlan step = one.take();
        auto first_recv = std::find_if(step.steps.begin(), step.steps.end(), [](const Step& x) {
          return x.kind == Kind::Recv || x.kind == Kind::RecvReduce;
        });
        plan.steps.insert(plan.steps.end(), step.steps.begin(), first_recv);
        receives.insert(receives.end(), first_recv, step.steps.end());
      }
      plan.steps.insert(plan.steps.end(), receives.begin(), receives.end());
      if (!any) break;
    }
  }
  return plan;
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || !supports(a)) return 0;
  const auto m = group_sizes(a);
  double t = 0;
  for (int l = 0; l < kLevels; ++l)
    t += level_cost(a.levels[static_cast<size_t>(l)], m[static_cast<size_t>(l)], level_count(a, m, l),
                    a.slice_elems, elem_size, c);
  return t;
}

std::vector<BuildArgs> variants(const BuildArgs& args, const Forced& forced) {
  std::vector<BuildArgs> out{args};
  out[0].levels = {};
  out[0].pipeline = 0;
  if (!shape_fits(args)) return out;
  const auto m = group_sizes(args);
  for (size_t l = 0; l < kLevels; ++l) {
    std::vector<BuildArgs> next;
    for (const BuildArgs& v : out)
      for (LevelAlgo algo : {LevelAlgo::Ring, LevelAlgo::Rabenseifner, LevelAlgo::RecDoubling}) {
        if (forced.levels[l] ? algo != *forced.levels[l]
                             : (m[l] <= 1 ? algo != LevelAlgo::Ring : !fits(algo, static_cast<int>(l), m)))
          continue;
        next.push_back(v);
        next.back().levels[l] = algo;
      }
    out = std::move(next);
  }
  // Each combination also with its levels overlapped in rounds, where the vector
  // makes more than one; forced: only that way, or never.
  if (forced.rounds >= 2) {
    for (BuildArgs& v : out) v.pipeline = static_cast<uint32_t>(forced.rounds);
    return out;
  }
  const uint64_t rounds = forced.rounds < 0 ? pipeline_rounds(args) : 1;
  if (rounds > 1) {
    const size_t combos = out.size();
    for (size_t c = 0; c < combos; ++c) {
      out.push_back(out[c]);
      out.back().pipeline = static_cast<uint32_t>(rounds);
    }
  }
  return out;
}

std::string describe_levels(const BuildArgs& a) {
  if (!shape_fits(a)) return "-";
  const auto m = group_sizes(a);
  std::string out;
  for (size_t l = 0; l < kLevels; ++l) {
    if (l) out += " / ";
    out += m[l] > 1 ? level_algo_name(a.levels[l]) : "-";
  }
  if (a.pipeline > 1) out += ", " + std::to_string(a.pipeline) + " rounds overlapped";
  return out;
}

}  // namespace weft::algo::hierarchical
