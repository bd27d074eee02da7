#include "algorithms/hierarchical.h"

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
RankPlan allreduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  if (n == 1 || !supports(a)) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  const auto m = group_sizes(a);
  const int L = a.local_size, D = m[0], node = r / L, k = r % L / D, d = r % D;
  std::array<std::vector<int>, kLevels> group;
  for (int i = 0; i < D; ++i) group[0].push_back(node * L + k * D + i);
  for (int i = 0; i < m[1]; ++i) group[1].push_back(node * L + i * D + d);
  for (int i = 0; i < m[2]; ++i) group[2].push_back(i * L + k * D + d);
  const std::array<int, kLevels> index{d, k, node};

  std::array<Part, kLevels> region;
  Part reg{0, a.count};
  // A rank alone at a level never reduces there: its input is still in Send.
  Buf input = Buf::Send;
  for (size_t l = 0; l < kLevels; ++l) {
    region[l] = reg;
    const int g = m[l], i = index[l];
    if (g <= 1) continue;
    int owned = i;
    switch (a.levels[l]) {
      case LevelAlgo::Ring:
        ring_reduce_scatter(b, group[l], i, reg, input, a.slice_elems);
        owned = mod(i + 1, g);
        break;
      case LevelAlgo::Rabenseifner: halving_reduce_scatter(b, group[l], i, reg, input); break;
      case LevelAlgo::RecDoubling: doubling_all_reduce(b, group[l], i, reg, input); break;
    }
    input = Buf::Recv;
    if (a.levels[l] != LevelAlgo::RecDoubling) {
      Part mine = even_part(reg.count, static_cast<uint64_t>(g), static_cast<uint64_t>(owned));
      mine.offset += reg.offset;
      reg = mine;
    }
  }
  for (size_t l = kLevels; l-- > 0;) {
    if (m[l] <= 1) continue;
    if (a.levels[l] == LevelAlgo::Ring) ring_all_gather(b, group[l], index[l], region[l], a.slice_elems);
    if (a.levels[l] == LevelAlgo::Rabenseifner) doubling_all_gather(b, group[l], index[l], region[l]);
  }
  return b.take();
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

std::vector<BuildArgs> variants(const BuildArgs& args, const ForcedLevels& forced) {
  std::vector<BuildArgs> out{args};
  out[0].levels = {};
  if (!shape_fits(args)) return out;
  const auto m = group_sizes(args);
  for (size_t l = 0; l < kLevels; ++l) {
    std::vector<BuildArgs> next;
    for (const BuildArgs& v : out)
      for (LevelAlgo algo : {LevelAlgo::Ring, LevelAlgo::Rabenseifner, LevelAlgo::RecDoubling}) {
        if (forced[l] ? algo != *forced[l] : (m[l] <= 1 ? algo != LevelAlgo::Ring : !fits(algo, static_cast<int>(l), m)))
          continue;
        next.push_back(v);
        next.back().levels[l] = algo;
      }
    out = std::move(next);
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
  return out;
}

}  // namespace weft::algo::hierarchical
