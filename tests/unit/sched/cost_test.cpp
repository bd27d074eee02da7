// The cost formulas are what the tuner ranks algorithms by; check them against
// hand-computed values and the regimes each algorithm is meant to win.
#include <gtest/gtest.h>

#include <string>

#include "algorithms/butterfly.h"
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace weft::algo {
namespace {

using sched::BuildArgs;
using sched::Coll;

BuildArgs args(Coll coll, int n, uint64_t count, uint64_t slice = 0) {
  BuildArgs a;
  a.coll = coll;
  a.nranks = n;
  a.count = count;
  a.slice_elems = slice;
  return a;
}

double cost_of(Coll coll, const char* name, const BuildArgs& a, const LinkCost& c) {
  const Algorithm* alg = find_algorithm(coll, name);
  EXPECT_NE(alg, nullptr) << name;
  return alg ? alg->cost(a, 4, c) : 0;
}

TEST(Cost, RingAllReduceMatchesFormula) {
  // n = 4, 1000 fp32 = 4000 bytes, unsliced: 2*3 alpha + 2*3/4*4000 beta + 3/4*4000 gamma.
  const LinkCost c{1.0, 0.01, 0.001};
  EXPECT_DOUBLE_EQ(ring::cost(args(Coll::AllReduce, 4, 1000), 4, c), 6 * 1.0 + 6000 * 0.01 + 3000 * 0.001);
  // Slicing into 250-element slices gives one round per chunk here (chunks are 250).
  EXPECT_DOUBLE_EQ(ring::cost(args(Coll::AllReduce, 4, 1000, 250), 4, c), 6 * 1.0 + 6000 * 0.01 + 3000 * 0.001);
  // 125-element slices: two rounds, twice the latency term.
  EXPECT_DOUBLE_EQ(ring::cost(args(Coll::AllReduce, 4, 1000, 125), 4, c), 12 * 1.0 + 6000 * 0.01 + 3000 * 0.001);
}

TEST(Cost, SingleRankIsFree) {
  const LinkCost c{1e-6, 1e-9, 1e-10};
  for (const Algorithm& a : all_algorithms()) EXPECT_EQ(a.cost(args(a.coll, 1, 1 << 20), 4, c), 0.0) << a.name;
}

// Latency-bound: 8 ranks, 8 bytes, alpha dominates. One round beats 2(n-1) rounds.
TEST(Cost, OneshotWinsTinyMessages) {
  const LinkCost c{5e-6, 1e-10, 1e-11};
  const BuildArgs a = args(Coll::AllReduce, 8, 2);
  EXPECT_LT(cost_of(Coll::AllReduce, "oneshot", a, c), cost_of(Coll::AllReduce, "ring", a, c));
  EXPECT_LT(cost_of(Coll::AllReduce, "recdoubling", a, c), cost_of(Coll::AllReduce, "ring", a, c));
}

// Bandwidth-bound: 64 MiB. Ring and Rabenseifner move 2(n-1)/n N; the tree and
// oneshot move far more.
TEST(Cost, RingWinsLargeMessages) {
  const LinkCost c{5e-6, 1e-10, 1e-11};
  const BuildArgs a = args(Coll::AllReduce, 16, 16u << 20);
  const double ring = cost_of(Coll::AllReduce, "ring", a, c);
  EXPECT_LT(ring, cost_of(Coll::AllReduce, "tree", a, c));
  EXPECT_LT(ring, cost_of(Coll::AllReduce, "oneshot", a, c));
  EXPECT_LT(ring, cost_of(Coll::AllReduce, "naive", a, c));
  EXPECT_LT(cost_of(Coll::AllReduce, "rabenseifner", a, c), cost_of(Coll::AllReduce, "recdoubling", a, c));
}

TEST(Cost, CheapestPicksByRegime) {
  const LinkCost c{5e-6, 1e-10, 1e-11};
  const Algorithm* tiny = cheapest(args(Coll::AllReduce, 8, 2), 4, c);
  ASSERT_NE(tiny, nullptr);
  EXPECT_NE(std::string(tiny->name), "ring") << "latency-bound: " << tiny->name;
  const Algorithm* big = cheapest(args(Coll::AllReduce, 16, 16u << 20), 4, c);
  ASSERT_NE(big, nullptr);
  EXPECT_LE(big->cost(args(Coll::AllReduce, 16, 16u << 20), 4, c),
            cost_of(Coll::AllReduce, "ring", args(Coll::AllReduce, 16, 16u << 20), c));
  for (auto coll : {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter,
                    Coll::AllToAll}) {
    const Algorithm* a = cheapest(args(coll, 4, 100), 4, c);
    ASSERT_NE(a, nullptr) << sched::coll_name(coll);
    EXPECT_EQ(a->coll, coll);
  }
}

TEST(Cost, ButterflyFollowsItsChoice) {
  const LinkCost c{5e-6, 1e-10, 1e-11};
  const BuildArgs small = args(Coll::AllReduce, 6, 10), large = args(Coll::AllReduce, 6, 1 << 20);
  EXPECT_FALSE(butterfly::uses_rabenseifner(small));
  EXPECT_TRUE(butterfly::uses_rabenseifner(large));
  EXPECT_DOUBLE_EQ(butterfly::cost(small, 4, c), butterfly::recdoubling_cost(small, 4, c));
  EXPECT_DOUBLE_EQ(butterfly::cost(large, 4, c), butterfly::rabenseifner_cost(large, 4, c));
}

}  // namespace
}  // namespace weft::algo
