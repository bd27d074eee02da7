// Every registered (collective, algorithm) proven by the verifier for n = 1..33
// and a few larger n up to 64 (see rank_counts), counts 0..3n+1 (see counts_for),
// unsliced and sliced, in place and out of place.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>

#include "algorithms/registry.h"
#include "sched/verify.h"

namespace weft::algo {
namespace {

using sched::BuildArgs;

class EveryAlgorithm : public ::testing::TestWithParam<const Algorithm*> {};

// Builders that cut the vector into per-rank chunks (count / n, with remainders)
// behave differently for every count mod n, so they get every count 0..3n+1 at
// every n. The others depend on count only through zero/non-zero and slicing, and
// their symbolic cost grows like n^2 * count, so above 16 ranks they get the
// counts around 0, n, 2n and 3n.
bool splits_by_rank(const Algorithm& alg) {
  const std::string name = alg.name;
  return (alg.coll == sched::Coll::AllReduce &&
          (name == "ring" || name == "direct" || name == "rabenseifner" || name == "hierarchical")) ||
         (alg.coll == sched::Coll::Broadcast && name == "scatter_allgather") ||
         (alg.coll == sched::Coll::Reduce && name == "reducescatter_gather");
}

// Ranks per node for hierarchical builders: the largest divisor d of n with
// d * d <= n, so both levels have more than one rank wherever n allows.
int node_size(int n) {
  int d = 1;
  for (int i = 1; i * i <= n; ++i)
    if (n % i == 0) d = i;
  return d;
}

bool near_boundary(uint64_t c, int n) {
  const uint64_t un = static_cast<uint64_t>(n);
  return c <= 3 || c % un <= 1 || c % un == un - 1;
}

bool is_ring_allreduce(const Algorithm& alg) {
  return alg.coll == sched::Coll::AllReduce && std::string(alg.name) == "ring";
}

// WEFT_SCHED_FULL_SWEEP=1 restores every count for every algorithm and every n
// up to 64 (minutes).
bool full_sweep() {
  const char* v = std::getenv("WEFT_SCHED_FULL_SWEEP");
  return v && *v && std::string(v) != "0";
}

// n = 1..33 (every power of two up to 32, its neighbours, every odd n), then
// 40, 48, 63 and 64; the full sweep every n up to 64 (the verifier's cost grows
// about as n^3, so the n above 33 would be 80% of the suite's time).
std::vector<int> rank_counts() {
  const bool full = full_sweep();
  std::vector<int> out;
  for (int n = 1; n <= 64; ++n)
    if (full || n <= 33 || n == 40 || n == 48 || n == 63 || n == 64) out.push_back(n);
  return out;
}

std::vector<uint64_t> counts_for(const Algorithm& alg, int n) {
  static const bool full = full_sweep();
  const uint64_t un = static_cast<uint64_t>(n);
  std::vector<uint64_t> out;
  for (uint64_t c = 0; c <= 3 * un + 1; ++c) {
    if (full || n <= 16 || splits_by_rank(alg) || near_boundary(c, n)) out.push_back(c);
  }
  return out;
}

TEST_P(EveryAlgorithm, VerifiesForAllSizes) {
  const Algorithm& alg = *GetParam();
  int checked = 0;
  for (int n : rank_counts()) {
    // Roots: 0 and a rank in the middle, so rooted code can't assume root 0.
    const int roots[2] = {0, n / 2 + (n > 2 ? 1 : 0)};
    const bool rooted = alg.coll == sched::Coll::Broadcast || alg.coll == sched::Coll::Reduce;
    for (int ri = 0; ri < (rooted && roots[1] != 0 && roots[1] < n ? 2 : 1); ++ri) {
      for (uint64_t count : counts_for(alg, n)) {
        // Sliced variant: all-reduce cuts chunks of ~count/n, so 2-element slices
        // give every chunk several; the others slice the whole vector or block,
        // where a third of it gives three or four slices.
        const uint64_t sliced = splits_by_rank(alg) || alg.coll == sched::Coll::AllReduce ? 2 : std::max<uint64_t>(1, count / 3);
        for (uint64_t slice : {uint64_t{0}, sliced}) {
          if (slice && !alg.sliced) continue;
          // Sliced, above 16 ranks: boundary counts only, except for the ring
          // all-reduce, which the executor is developed against (keeps the suite
          // well inside its timeout on a loaded machine).
          if (slice && n > 16 && !full_sweep() && !near_boundary(count, n) && !is_ring_allreduce(alg)) continue;
          BuildArgs a;
          a.coll = alg.coll;
          a.nranks = n;
          a.count = count;
          a.root = roots[ri];
          a.slice_elems = slice;
          a.local_size = node_size(n);
          if (!supports(alg, a)) continue;
          const sched::Schedule s = sched::build_all(a, alg.name, alg.build);
          for (bool in_place : {false, true}) {
            Status st = sched::verify(s, in_place);
            ASSERT_TRUE(st.ok()) << st.message();
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST_P(EveryAlgorithm, HasCostModel) {
  const Algorithm& alg = *GetParam();
  ASSERT_NE(alg.cost, nullptr);
  BuildArgs a;
  a.coll = alg.coll;
  a.nranks = 8;
  a.count = 1 << 20;
  a.local_size = 4;
  ASSERT_TRUE(supports(alg, a));
  const LinkCost c{1e-6, 1e-10, 1e-11};
  EXPECT_GT(alg.cost(a, 4, c), 0.0);
  a.nranks = 1;
  EXPECT_GE(alg.cost(a, 4, c), 0.0);
}

std::vector<const Algorithm*> all() {
  std::vector<const Algorithm*> out;
  for (const Algorithm& a : all_algorithms()) out.push_back(&a);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryAlgorithm, ::testing::ValuesIn(all()),
                         [](const ::testing::TestParamInfo<const Algorithm*>& info) {
                           return std::string(sched::coll_name(info.param->coll)) + "_" + info.param->name;
                         });

// Bigger vectors than the sweep reaches: many slices per chunk, and the
// Rabenseifner branch of the auto butterfly.
TEST(Algorithms, LargerCountsAndSlices) {
  for (const Algorithm& alg : all_algorithms())
    for (int n : {2, 3, 5, 8, 13}) {
      for (uint64_t count : {uint64_t{2047}, uint64_t{5001}}) {
        for (uint64_t slice : {uint64_t{0}, uint64_t{64}, uint64_t{1000}}) {
          if (slice && !alg.sliced) continue;
          BuildArgs a;
          a.coll = alg.coll;
          a.nranks = n;
          a.count = count;
          a.root = n - 1;
          a.slice_elems = slice;
          a.local_size = n % 2 ? 1 : 2;
          Status st = sched::verify_both(sched::build_all(a, alg.name, alg.build));
          ASSERT_TRUE(st.ok()) << st.message();
        }
      }
    }
}

// Every node shape: one node, one rank per node, and everything in between.
class TwoLevel : public ::testing::TestWithParam<const char*> {};

TEST_P(TwoLevel, EveryNodeSize) {
  const Algorithm* alg = find_algorithm(sched::Coll::AllReduce, GetParam());
  ASSERT_NE(alg, nullptr);
  EXPECT_TRUE(alg->two_level);
  for (int n = 1; n <= 24; ++n)
    for (int L = 1; L <= n; ++L) {
      BuildArgs a;
      a.nranks = n;
      a.local_size = L;
      EXPECT_EQ(supports(*alg, a), n % L == 0);
      if (n % L) continue;
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, static_cast<uint64_t>(n) - 1, static_cast<uint64_t>(n * n + 1)})
        for (uint64_t slice : {uint64_t{0}, uint64_t{1}}) {
          a.count = count;
          a.slice_elems = slice;
          Status st = sched::verify_both(sched::build_all(a, alg->name, alg->build));
          ASSERT_TRUE(st.ok()) << "L=" << L << ": " << st.message();
        }
    }
  BuildArgs flat;
  flat.nranks = 4;
  EXPECT_FALSE(supports(*alg, flat)) << "local_size 0 means unknown topology";
}

INSTANTIATE_TEST_SUITE_P(Algorithms, TwoLevel, ::testing::Values("hierarchical", "chain_tree", "rings"));

// Nodes cut into NUMA domains: every (ranks, node, domain) shape up to 24 ranks.
TEST(Algorithms, HierarchicalEveryDomainSize) {
  const Algorithm* alg = find_algorithm(sched::Coll::AllReduce, "hierarchical");
  ASSERT_NE(alg, nullptr);
  EXPECT_TRUE(alg->domain_level);
  for (int n = 1; n <= 24; ++n)
    for (int L = 1; L <= n; ++L) {
      if (n % L) continue;
      for (int D = 1; D <= L; ++D) {
        BuildArgs a;
        a.nranks = n;
        a.local_size = L;
        a.domain_size = D;
        EXPECT_EQ(supports(*alg, a), L % D == 0);
        if (L % D) continue;
        for (uint64_t count : {uint64_t{1}, static_cast<uint64_t>(n) + 1, static_cast<uint64_t>(n * n + 3)})
          for (uint64_t slice : {uint64_t{0}, uint64_t{2}}) {
            a.count = count;
            a.slice_elems = slice;
            Status st = sched::verify_both(sched::build_all(a, alg->name, alg->build));
            ASSERT_TRUE(st.ok()) << "n=" << n << " L=" << L << " D=" << D << ": " << st.message();
          }
      }
    }
}

// n ranks, L per node, D per domain (0: one domain per node).
BuildArgs shape(int n, int L, int D = 0) {
  BuildArgs a;
  a.nranks = n;
  a.local_size = L;
  a.domain_size = D;
  return a;
}

// Calls f(args) for every (ranks, ranks per node, ranks per domain) shape with
// 2..max_n ranks; f returns false to stop.
template <typename F>
void for_each_shape(int max_n, F f) {
  for (int n = 2; n <= max_n; ++n)
    for (int L = 1; L <= n; ++L) {
      if (n % L) continue;
      for (int D = 1; D <= L; ++D)
        if (L % D == 0 && !f(shape(n, L, D))) return;
    }
}

std::string shape_of(const Algorithm& alg, const BuildArgs& a) {
  return "n=" + std::to_string(a.nranks) + " L=" + std::to_string(a.local_size) + " D=" +
         std::to_string(a.domain_size) + " " + alg.describe(a) + " count=" + std::to_string(a.count);
}

// Every combination of level algorithms hierarchical can run (its variants), for
// every (ranks, node, domain) shape up to 32 ranks whose levels have a
// power-of-two group somewhere, with counts around the splits, unsliced and sliced.
TEST(Algorithms, HierarchicalEveryLevelVariant) {
  const Algorithm* alg = find_algorithm(sched::Coll::AllReduce, "hierarchical");
  ASSERT_NE(alg, nullptr);
  ASSERT_NE(alg->variants, nullptr);
  int butterflies = 0;
  for_each_shape(32, [&](const BuildArgs& a) {
    const std::vector<BuildArgs> vs = alg->variants(a, {});
    if (vs.size() == 1) return true;  // rings only: HierarchicalEveryDomainSize
    const uint64_t n = static_cast<uint64_t>(a.nranks);
    for (const BuildArgs& v0 : vs) {
      EXPECT_TRUE(supports(*alg, v0)) << shape_of(*alg, v0);
      ++butterflies;
      for (uint64_t count : {uint64_t{1}, n - 1, 3 * n + 1})
        for (uint64_t slice : {uint64_t{0}, uint64_t{2}}) {
          BuildArgs v = v0;
          v.count = count;
          v.slice_elems = slice;
          Status st = sched::verify_both(sched::build_all(v, alg->name, alg->build));
          EXPECT_TRUE(st.ok()) << shape_of(*alg, v) << ": " << st.message();
          if (!st.ok()) return false;
        }
    }
    return true;
  });
  EXPECT_GT(butterflies, 100);
}

// The same with the levels overlapped in rounds (BuildArgs::pipeline), which
// interleaves the rounds' phases step by step on every rank: every shape to 16
// ranks, every level combination, rounds that split the vector evenly, unevenly
// and into empty pieces (count < rounds).
TEST(Algorithms, HierarchicalPipelinedRounds) {
  const Algorithm* alg = find_algorithm(sched::Coll::AllReduce, "hierarchical");
  int checked = 0;
  for_each_shape(16, [&](const BuildArgs& a) {
    const uint64_t n = static_cast<uint64_t>(a.nranks);
    for (BuildArgs v : alg->variants(a, {}))
      for (uint32_t rounds : {2u, 3u})
        for (uint64_t count : {uint64_t{2}, 3 * n + 1, 8 * n}) {
          v.pipeline = rounds;
          v.count = count;
          Status st = sched::verify_both(sched::build_all(v, alg->name, alg->build));
          EXPECT_TRUE(st.ok()) << shape_of(*alg, v) << ": " << st.message();
          if (!st.ok()) return false;
          ++checked;
        }
    return true;
  });
  EXPECT_GT(checked, 500);
}

// The variants offer overlapped rounds once the vector holds more than one round
// (a slice per rank of a node each), at most 8, beside every level combination.
TEST(Algorithms, HierarchicalOffersRoundsForLargeVectors) {
  const Algorithm* alg = find_algorithm(sched::Coll::AllReduce, "hierarchical");
  BuildArgs a = shape(16, 8);
  a.slice_elems = 100;
  a.count = 1599;  // under two rounds of 8 x 100
  // Ring or rabenseifner inside the nodes, ring, rabenseifner or recdoubling across.
  EXPECT_EQ(alg->variants(a, {}).size(), 6u);
  a.count = 2400;
  std::vector<BuildArgs> vs = alg->variants(a, {});
  ASSERT_EQ(vs.size(), 12u);
  EXPECT_EQ(vs.front().pipeline, 0u);
  EXPECT_EQ(vs.back().pipeline, 3u);
  EXPECT_EQ(alg->describe(vs.back()), "rabenseifner / - / recdoubling, 3 rounds overlapped");
  a.count = 100000;
  EXPECT_EQ(alg->variants(a, {}).back().pipeline, 8u);
  // WEFT_HIER_ROUNDS: never (0 or 1), or always N, also where the vector is small.
  Forced never;
  never.rounds = 0;
  EXPECT_EQ(alg->variants(a, never).size(), 6u);
  EXPECT_EQ(alg->variants(a, never).back().pipeline, 0u);
  Forced three;
  three.rounds = 3;
  a.count = 10;
  vs = alg->variants(a, three);
  ASSERT_EQ(vs.size(), 6u);
  for (const BuildArgs& v : vs) EXPECT_EQ(v.pipeline, 3u);
}

// Which combinations exist: 2 nodes x 2 domains x 4 ranks has a 4-rank domain
// (ring or rabenseifner), 2 domains per node (ring or rabenseifner) and 2 nodes,
// the outermost level (ring, rabenseifner or recdoubling): 2 x 2 x 3 = 12. With 3
// ranks per domain only rings fit there (1 x 2 x 3); forcing a level that cannot
// run its group leaves that one variant, which hierarchical then refuses.
TEST(Algorithms, HierarchicalVariantsFollowTheGroups) {
  const Algorithm* alg = find_algorithm(sched::Coll::AllReduce, "hierarchical");
  BuildArgs a = shape(16, 8, 4);
  EXPECT_EQ(alg->variants(a, {}).size(), 12u);
  EXPECT_EQ(alg->variants(a, {}).front().levels, (std::array<sched::LevelAlgo, 3>{}));
  a.nranks = 12;
  a.local_size = 6;
  a.domain_size = 3;
  EXPECT_EQ(alg->variants(a, {}).size(), 6u);
  // recdoubling inside domains would leave the outer levels nothing to do.
  a.nranks = 16;
  a.local_size = 8;
  a.domain_size = 4;
  const std::vector<BuildArgs> inner_doubling = alg->variants(a, {sched::LevelAlgo::RecDoubling});
  ASSERT_EQ(inner_doubling.size(), 6u);
  EXPECT_FALSE(supports(*alg, inner_doubling[0]));
  EXPECT_EQ(alg->describe(inner_doubling[0]), "recdoubling / ring / ring");
  // ...but on one node of one domain it is the outermost level.
  a.nranks = a.local_size = 8;
  a.domain_size = 0;
  const std::vector<BuildArgs> one_level = alg->variants(a, {sched::LevelAlgo::RecDoubling});
  ASSERT_EQ(one_level.size(), 1u);
  EXPECT_TRUE(supports(*alg, one_level[0]));
  EXPECT_EQ(alg->describe(one_level[0]), "recdoubling / - / -");
}

// 2 nodes x 2 domains x 4 ranks, N elements: each rank sends 2(D-1)N/D inside its
// domain, 2(K-1)N/(DK) to the other domain of its node and 2(M-1)N/(LM) to the
// other node (the three reduce-scatter + all-gather pairs), with D = 4, K = 2,
// M = 2, L = 8: 1.5 N, N/4 and N/8. The same with Rabenseifner in the domains
// (halving and doubling send N/2 + N/4 each way, as the ring's 3 x N/4) and
// recursive doubling across nodes (the whole share N/8 once each way).
TEST(Algorithms, HierarchicalKeepsBytesInsideDomains) {
  const Algorithm* alg = find_algorithm(sched::Coll::AllReduce, "hierarchical");
  ASSERT_NE(alg, nullptr);
  BuildArgs a;
  a.nranks = 16;
  a.local_size = 8;
  a.domain_size = 4;
  a.count = 6400;
  using sched::LevelAlgo;
  for (auto levels : {std::array<LevelAlgo, 3>{}, {LevelAlgo::Rabenseifner, LevelAlgo::Ring, LevelAlgo::RecDoubling}})
    for (uint32_t rounds : {0u, 4u}) {  // the levels overlapped in 4 rounds of 1600 move the same bytes
      a.levels = levels;
      a.pipeline = rounds;
      ASSERT_TRUE(supports(*alg, a));
      for (int r = 0; r < a.nranks; ++r) {
        uint64_t in_domain = 0, across_domains = 0, across_nodes = 0;
        for (const sched::Step& s : alg->build(a, r).steps) {
          if (s.kind != sched::Kind::Send) continue;
          if (s.peer / 8 != r / 8) across_nodes += s.src.count;
          else if (s.peer / 4 != r / 4) across_domains += s.src.count;
          else in_domain += s.src.count;
        }
        EXPECT_EQ(in_domain, 9600u) << "rank " << r << " " << alg->describe(a);
        EXPECT_EQ(across_domains, 1600u) << "rank " << r << " " << alg->describe(a);
        EXPECT_EQ(across_nodes, 800u) << "rank " << r << " " << alg->describe(a);
      }
    }
}

// The peers a plan talks to.
std::vector<int> peers_of(const sched::RankPlan& p) {
  std::vector<int> out;
  for (const sched::Step& s : p.steps)
    if (s.peer >= 0 && std::find(out.begin(), out.end(), s.peer) == out.end()) out.push_back(s.peer);
  std::sort(out.begin(), out.end());
  return out;
}

// One rank per node: the double binary tree itself. One node: a chain, each rank
// talking to its neighbours only (from 4 ranks two pairs of chains, the second
// rotated by half the node: the neighbours round the node). 16 nodes x 8: only
// the chains' ends (ranks 0 and 7 of a node for the first pair, 4 and 3 for the
// second) talk across nodes, each to at most 3 other nodes' ranks at the same
// place (parent and children in its tree).
TEST(Algorithms, ChainTreeShapes) {
  const Algorithm* chain = find_algorithm(sched::Coll::AllReduce, "chain_tree");
  const Algorithm* dbt = find_algorithm(sched::Coll::AllReduce, "double_tree");
  ASSERT_NE(chain, nullptr);
  ASSERT_NE(dbt, nullptr);
  BuildArgs a;
  a.count = 1000;
  a.slice_elems = 100;
  for (int n : {2, 5, 8, 13}) {
    a.nranks = n;
    a.local_size = 1;
    for (int r = 0; r < n; ++r) EXPECT_EQ(peers_of(chain->build(a, r)), peers_of(dbt->build(a, r))) << n << " " << r;
    a.local_size = n;
    for (int r = 0; r < n; ++r) {
      std::vector<int> want;
      if (n >= 4) want = {(r + n - 1) % n, (r + 1) % n};
      if (n < 4 && r > 0) want.push_back(r - 1);
      if (n < 4 && r + 1 < n) want.push_back(r + 1);
      std::sort(want.begin(), want.end());
      EXPECT_EQ(peers_of(chain->build(a, r)), want) << n << " " << r;
    }
  }
  a.nranks = 128;
  a.local_size = 8;
  for (int r = 0; r < 128; ++r) {
    int across = 0;
    for (int p : peers_of(chain->build(a, r))) {
      if (p / 8 == r / 8) {
        EXPECT_TRUE((p - r + 8) % 8 == 1 || (r - p + 8) % 8 == 1) << r << " -> " << p;
        continue;
      }
      ++across;
      EXPECT_TRUE(r % 8 == 0 || r % 8 == 7 || r % 8 == 4 || r % 8 == 3) << r << " -> " << p;
      EXPECT_EQ(p % 8, r % 8) << r << " -> " << p;
    }
    EXPECT_LE(across, 3) << r;
  }
}

TEST(Registry, EveryCollectiveHasAlgorithms) {
  for (auto coll : {sched::Coll::AllReduce, sched::Coll::Broadcast, sched::Coll::Reduce, sched::Coll::AllGather,
                    sched::Coll::ReduceScatter, sched::Coll::AllToAll})
    EXPECT_FALSE(algorithms_for(coll).empty()) << sched::coll_name(coll);
  for (const char* name : {"ring", "tree", "butterfly", "recdoubling", "rabenseifner", "direct", "naive", "oneshot"})
    EXPECT_NE(find_algorithm(sched::Coll::AllReduce, name), nullptr) << name;
}

TEST(Registry, FindsRing) {
  const Algorithm* a = find_algorithm(sched::Coll::AllReduce, "ring");
  ASSERT_NE(a, nullptr);
  EXPECT_STREQ(a->name, "ring");
  EXPECT_EQ(find_algorithm(sched::Coll::AllReduce, "nope"), nullptr);
  EXPECT_FALSE(algorithms_for(sched::Coll::AllReduce).empty());
}

TEST(Registry, NamesAreUniquePerCollective) {
  for (const Algorithm& a : all_algorithms()) EXPECT_EQ(find_algorithm(a.coll, a.name), &a) << a.name;
}

// The tree all-reduce runs its slices one after another on one host and sends the
// next slice up before the last comes down across hosts (tree.cpp): both orders
// must be correct and deadlock-free for every rank count, sliced or not, in place
// or not; and across hosts every non-root rank does send slice 1 before it
// receives slice 0, where on one host none does.
TEST(TreeAllReduce, BothSliceOrdersVerify) {
  const Algorithm* tree = find_algorithm(sched::Coll::AllReduce, "tree");
  ASSERT_NE(tree, nullptr);
  for (int n = 2; n <= 17; ++n) {
    for (int local : {n, 1, 0}) {
      for (uint64_t slice : {uint64_t{0}, uint64_t{3}}) {
        BuildArgs a;
        a.coll = sched::Coll::AllReduce;
        a.nranks = n;
        a.count = 20;
        a.slice_elems = slice;
        a.local_size = local;
        const sched::Schedule s = sched::build_all(a, "tree", tree->build);
        for (bool in_place : {false, true}) {
          Status st = sched::verify(s, in_place);
          ASSERT_TRUE(st.ok()) << "n=" << n << " local=" << local << " slice=" << slice << ": " << st.message();
        }
        if (slice == 0) continue;
        for (int r = 1; r < n; ++r) {
          // The position of the first send (up, slice 0), of the second send up
          // (slice 1, the first send after it to the same peer) and of the first
          // receive from that peer (slice 0 coming down).
          const std::vector<sched::Step>& st = s.ranks[static_cast<size_t>(r)].steps;
          int parent = -1;
          size_t up0 = st.size(), up1 = st.size(), down0 = st.size();
          for (size_t i = 0; i < st.size(); ++i) {
            if (st[i].kind == sched::Kind::Send && parent < 0) parent = st[i].peer, up0 = i;
            else if (st[i].kind == sched::Kind::Send && st[i].peer == parent && up1 == st.size()) up1 = i;
            else if (st[i].kind == sched::Kind::Recv && st[i].peer == parent && down0 == st.size()) down0 = i;
          }
          ASSERT_LT(up0, st.size()) << "n=" << n << " rank " << r;
          const bool across = local == 1;
          EXPECT_EQ(up1 < down0, across) << "n=" << n << " local=" << local << " rank " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace weft::algo
