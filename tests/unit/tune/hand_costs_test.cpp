// The tuner's pick against costs worked out by hand. Each test loads a small
// tuning file with constants chosen here, writes the cost formulas of the
// contending algorithms (the comment above each builder in algorithms/*.cpp) with
// those constants, and asserts the pick and every contender's predicted time
// equal to the hand arithmetic. Nothing expected is computed by the tuner or the
// cost functions under test.
//
// The tuners are made with fewer ranks on this host than in all (link class
// "net"): the built-in table has only generic net constants, so the file below
// decides every constant used.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "algorithms/registry.h"
#include "sim/simulate.h"
#include "tune/table.h"
#include "tune/tuner.h"

namespace weft::tune {
namespace {

using sched::BuildArgs;
using sched::Coll;

// A tuning file for the test's lifetime.
class TuningFile {
 public:
  explicit TuningFile(const std::string& text) {
    char path[] = "/tmp/weft-hand-costs-XXXXXX";
    int fd = mkstemp(path);
    EXPECT_GE(fd, 0);
    if (fd >= 0) close(fd);
    path_ = path;
    std::ofstream(path_) << text;
  }
  ~TuningFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Every all-reduce algorithm except ring, recdoubling and hierarchical costs
// 1 s per message and nothing per byte. Each of them sends at least one message
// at 4, 6 or 8 ranks (alpha coefficients at 4 ranks: tree 2*lg(4) = 4,
// double_tree 2(depth + k - 1) >= 2, butterfly 2 (recursive doubling below 2048
// elements, else 2*lg(4) = 4), rabenseifner 4, direct 6, naive 6, oneshot 3), so
// each predicts >= 1 s, far above any ring or recdoubling time below (< 25 ms).
constexpr const char* kPricedOut =
    "net allreduce tree 0 0 1 0 0\n"
    "net allreduce double_tree 0 0 1 0 0\n"
    "net allreduce butterfly 0 0 1 0 0\n"
    "net allreduce rabenseifner 0 0 1 0 0\n"
    "net allreduce direct 0 0 1 0 0\n"
    "net allreduce naive 0 0 1 0 0\n"
    "net allreduce oneshot 0 0 1 0 0\n";

// Generic net constants: alpha = 10 us per message, beta = 1 ns per byte sent,
// gamma = 0.4 ns per byte reduced (ring, recdoubling and hierarchical use them).
std::string table_a() { return std::string("net * * 0 0 1e-05 1e-09 4e-10\n") + kPricedOut; }

std::unique_ptr<Tuner> tuner(const TuningFile& f, int nranks, int local, const std::string& algo = "") {
  Options o;
  o.algo = algo;
  o.tuning_file = f.path();
  o.log_table = false;
  o.online.enabled = false;
  std::unique_ptr<Tuner> t;
  Status st = Tuner::create(nranks, local, o, &t);
  EXPECT_TRUE(st.ok()) << st.message();
  return t;
}

// float elements; no pipeline slices (slice_elems 0: the ring's k = 1).
BuildArgs allreduce(int nranks, uint64_t count, int local_size = 0) {
  BuildArgs b;
  b.coll = Coll::AllReduce;
  b.nranks = nranks;
  b.count = count;
  b.slice_elems = 0;
  b.local_size = local_size;
  return b;
}

std::string choose(Tuner& t, const BuildArgs& b) {
  const algo::Algorithm* a = nullptr;
  Status st = t.choose(b.coll, b, 4, &a);
  EXPECT_TRUE(st.ok()) << st.message();
  return a != nullptr ? a->name : "(none)";
}

double predicted(const Tuner& t, const char* name, const BuildArgs& b) {
  const algo::Algorithm* a = algo::find_algorithm(b.coll, name);
  EXPECT_NE(a, nullptr) << name;
  return a != nullptr ? t.predict(*a, b, 4) : -1;
}

// Hand-computed seconds are compared to 1e-12 s (1 ps): the predictions are sums
// of a few products, exact to ~1e-18 s at these magnitudes.
constexpr double kPs = 1e-12;

// 4 ranks, table A, N = 4 * count bytes:
//   ring (n-1 = 3, k = 1): 2(n-1)k alpha + 2(n-1)/n N beta + (n-1)/n N gamma
//                        = 6 alpha + 1.5 N beta + 0.75 N gamma = 60 us + 1.8 ns * N
//   recdoubling (p = 4, lg p = 2, no fold): lg p (alpha + N beta + N gamma)
//                        = 2 alpha + 2 N beta + 2 N gamma        = 20 us + 2.8 ns * N
// ring - recdoubling = 40 us - 1 ns * N: equal at N = 40000 B = 10000 floats.
TEST(HandCosts, LatencyBoundSmallCallPicksRecursiveDoubling) {
  TuningFile f(table_a());
  auto t = tuner(f, 4, 1);
  ASSERT_EQ(t->link_class(), LinkClass::Net);
  const BuildArgs b = allreduce(4, 1);  // N = 4 B
  // recdoubling: 20 us + 2.8 ns * 4 = 20.0112 us; ring: 60 us + 1.8 ns * 4 = 60.0072 us.
  EXPECT_NEAR(predicted(*t, "recdoubling", b), 20.0112e-6, kPs);
  EXPECT_NEAR(predicted(*t, "ring", b), 60.0072e-6, kPs);
  // A priced-out one: tree = 2 lg(4) k alpha = 4 * 1 s.
  EXPECT_NEAR(predicted(*t, "tree", b), 4.0, kPs);
  EXPECT_EQ(choose(*t, b), "recdoubling");
}

// Counts that never repeat: the cache of picks is emptied at its bound, and the
// picks after that are still the model's (the crossover above: 10000 floats).
TEST(HandCosts, PicksOfEverNewCountsStayBounded) {
  TuningFile f(table_a());
  auto t = tuner(f, 4, 1);
  for (uint64_t count = 1; count <= Tuner::kMaxCachedShapes + 1000; ++count) {
    const algo::Algorithm* a = nullptr;
    ASSERT_TRUE(t->choose(Coll::AllReduce, allreduce(4, count), 4, &a).ok());
    ASSERT_LE(t->cached_picks(), Tuner::kMaxCachedShapes) << "after count " << count;
  }
  EXPECT_EQ(choose(*t, allreduce(4, 1)), "recdoubling");
  EXPECT_EQ(choose(*t, allreduce(4, 1000000)), "ring");
}

TEST(HandCosts, BandwidthBoundLargeCallPicksTheRing) {
  TuningFile f(table_a());
  auto t = tuner(f, 4, 1);
  const BuildArgs b = allreduce(4, 1 << 20);  // N = 4194304 B
  // recdoubling: 20 us + 2.8 ns * 4194304 = 20 us + 11744.0512 us = 11764.0512 us
  // ring:        60 us + 1.8 ns * 4194304 = 60 us +  7549.7472 us =  7609.7472 us
  EXPECT_NEAR(predicted(*t, "recdoubling", b), 11764.0512e-6, kPs);
  EXPECT_NEAR(predicted(*t, "ring", b), 7609.7472e-6, kPs);
  EXPECT_EQ(choose(*t, b), "ring");
}

TEST(HandCosts, CrossoverJustBelowAndAbove) {
  TuningFile f(table_a());
  auto t = tuner(f, 4, 1);
  // 9999 floats, N = 39996 B: recdoubling 20 + 111.9888 = 131.9888 us,
  //                           ring        60 +  71.9928 = 131.9928 us (4 ns more).
  const BuildArgs below = allreduce(4, 9999);
  EXPECT_NEAR(predicted(*t, "recdoubling", below), 131.9888e-6, kPs);
  EXPECT_NEAR(predicted(*t, "ring", below), 131.9928e-6, kPs);
  EXPECT_EQ(choose(*t, below), "recdoubling");
  // 10001 floats, N = 40004 B: recdoubling 20 + 112.0112 = 132.0112 us,
  //                            ring        60 +  72.0072 = 132.0072 us (4 ns less).
  const BuildArgs above = allreduce(4, 10001);
  EXPECT_NEAR(predicted(*t, "recdoubling", above), 132.0112e-6, kPs);
  EXPECT_NEAR(predicted(*t, "ring", above), 132.0072e-6, kPs);
  EXPECT_EQ(choose(*t, above), "ring");
}

// Constants that are powers of two, so that every product and sum above is exact:
// alpha = 2^-17 s, beta = 2^-30 s/B, gamma = 0. At 4 ranks:
//   ring        = 6 alpha + 1.5 N beta,  recdoubling = 2 alpha + 2 N beta,
// equal where 4 alpha = 0.5 N beta: N = 8 * 2^13 = 65536 B = 16384 floats, where
// both are 6 * 2^-17 + 1.5 * 2^16 * 2^-30 = (6 + 12) * 2^-17 = 18 * 2^-17 s exactly.
// A tie goes to the earlier algorithm in registry order: ring (before recdoubling).
TEST(HandCosts, ExactTieGoesToRegistryOrder) {
  TuningFile f(std::string("net * * 0 0 7.62939453125e-06 9.31322574615478515625e-10 0\n") + kPricedOut);
  auto t = tuner(f, 4, 1);
  const double unit = 1.0 / 131072;  // 2^-17 s
  const BuildArgs tie = allreduce(4, 16384);
  EXPECT_EQ(predicted(*t, "ring", tie), 18 * unit);
  EXPECT_EQ(predicted(*t, "recdoubling", tie), 18 * unit);
  EXPECT_EQ(choose(*t, tie), "ring");
  // ring - recdoubling = 4 alpha - 0.5 N beta = (4 * 8192 - N / 2) * 2^-30 s:
  // 16383 floats (N = 65532): (32768 - 32766) * 2^-30 > 0, recdoubling;
  // 16385 floats (N = 65540): (32768 - 32770) * 2^-30 < 0, ring.
  EXPECT_EQ(choose(*t, allreduce(4, 16383)), "recdoubling");
  EXPECT_EQ(choose(*t, allreduce(4, 16385)), "ring");
}

// hierarchical runs only where local_size divides the rank count (its supports());
// its cost() returns 0 where it cannot run, so offering it there would make it win.
// 6 ranks, table A, N = 4194304 B (1 Mi floats):
//   hierarchical, L = 3 per host, M = 2 hosts, rings at both levels (L = 3 rules out
//   the butterflies inside hosts; across, rabenseifner is priced out and recdoubling
//   costs 10 us + 1.4 ns * B = 1967.34 us against the ring's 1697.72 us below),
//   B = 349525 floats = 1398100 B across hosts (N/L rounded down to whole elements):
//     2(L-1)(alpha + N/L beta) + (L-1) N/L gamma + 2(M-1)(alpha + B/M beta) + (M-1) B/M gamma
//     = 40 us + 4/3 N * 1 ns + 2/3 N * 0.4 ns + 20 us + B * 1 ns + B/2 * 0.4 ns
//     = 40 us + 5592.405333 us + 1118.481067 us + 20 us + 1398.1 us + 279.62 us = 8448.6064 us
//   ring: 10 alpha + 10/6 N beta + 5/6 N gamma = 100 us + 2 ns * N = 8488.608 us
//   recdoubling, p = 4, one fold: 2(alpha + N beta + N gamma) + 2(alpha + N beta) + N gamma
//     = 4 alpha + 4 N beta + 3 N gamma = 40 us + 5.2 ns * N = 40 us + 21810.3808 us
TEST(HandCosts, AlgorithmThatCannotRunTheRankCountIsNeverPicked) {
  TuningFile f(table_a());
  auto t = tuner(f, 6, 3);
  const BuildArgs three_per_host = allreduce(6, 1 << 20, 3);
  EXPECT_NEAR(predicted(*t, "hierarchical", three_per_host), 8448.6064e-6, kPs);
  EXPECT_NEAR(predicted(*t, "ring", three_per_host), 8488.608e-6, kPs);
  EXPECT_NEAR(predicted(*t, "recdoubling", three_per_host), 21850.3808e-6, kPs);
  EXPECT_EQ(choose(*t, three_per_host), "hierarchical");

  // 4 per host: 6 % 4 != 0, so hierarchical cannot run; the ring is next.
  auto t4 = tuner(f, 6, 4);
  const BuildArgs four_per_host = allreduce(6, 1 << 20, 4);
  EXPECT_NEAR(predicted(*t4, "ring", four_per_host), 8488.608e-6, kPs);
  EXPECT_EQ(choose(*t4, four_per_host), "ring");
  for (const Prediction& p : t4->candidates(Coll::AllReduce, four_per_host, 4))
    EXPECT_STRNE(p.algo->name, "hierarchical");
  // Forcing it there is an error, not a silent fallback.
  auto forced = tuner(f, 6, 4, "allreduce:hierarchical");
  const algo::Algorithm* a = nullptr;
  Status st = forced->choose(Coll::AllReduce, four_per_host, 4, &a);
  EXPECT_EQ(st.code(), weftInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("WEFT_ALGO=allreduce:hierarchical"), std::string::npos) << st.message();
}

// Hierarchical's levels by size, on the formulas (no layout: every level priced
// with the communicator's class, net of table A: alpha 10 us, beta 1 ns/B, gamma
// 0.4 ns/B). 8 ranks, 2 per host, 4 hosts; the hosts' level (2 ranks) is a ring
// (rabenseifner ties it at 2 ranks; ring comes first); across the 4 hosts, on each
// rank's share B = N/2:
//   ring 6 alpha + 1.5 B beta + 0.75 B gamma = 60 us + 1.8 ns * B
//   rabenseifner 4 alpha + 1.5 B beta + 0.75 B gamma = 40 us + 1.8 ns * B
//   recdoubling 2 (alpha + B beta + B gamma) = 20 us + 2.8 ns * B
// recdoubling is the cheapest below B = 20000 B, rabenseifner above; either
// replaces the ring only where the whole plan is predicted 10% faster.
//   8 floats (N = 32 B, B = 16 B): 2 alpha + N beta + N/2 gamma = 20.0384 us in the
//     host, + 20.0448 us across: 40.0832 us, against 80.0672 us with the ring.
//   1 Mi floats (N = 4194304 B): 20 + 4194.304 + 838.8608 = 5053.1648 us in the host,
//     + 40 + 1.8 ns * 2097152 = 3814.8736 us across with rabenseifner: 8868.0384 us,
//     0.2% under the ring's 8888.0384 us: the ring stays.
// 16 ranks, 2 per host, 8 hosts, 8192 floats (N = 32768 B, B = 16384 B): in the
//   host 20 + 32.768 + 6.5536 = 59.3216 us; across, ring 14 alpha + 2.1 ns * B =
//   174.4064 us, rabenseifner 6 alpha + 2.1 ns * B = 94.4064 us, recdoubling
//   3 alpha + 4.2 ns * B = 98.8128 us: rabenseifner, 153.728 us against 233.728 us.
TEST(HandCosts, HierarchicalLevelsFollowEachLevelsSize) {
  TuningFile f(table_a());
  auto t = tuner(f, 8, 2);
  const algo::Algorithm* hier = algo::find_algorithm(Coll::AllReduce, "hierarchical");
  const BuildArgs small = allreduce(8, 8, 2), large = allreduce(8, 1 << 20, 2);
  EXPECT_EQ(hier->describe(t->tailored(*hier, small, 4)), "ring / - / recdoubling");
  EXPECT_NEAR(predicted(*t, "hierarchical", small), 40.0832e-6, kPs);
  EXPECT_EQ(hier->describe(t->tailored(*hier, large, 4)), "ring / - / ring");
  EXPECT_NEAR(predicted(*t, "hierarchical", large), 8888.0384e-6, kPs);
  auto sixteen = tuner(f, 16, 2);
  const BuildArgs eight_hosts = allreduce(16, 8192, 2);
  EXPECT_EQ(hier->describe(sixteen->tailored(*hier, eight_hosts, 4)), "ring / - / rabenseifner");
  EXPECT_NEAR(predicted(*sixteen, "hierarchical", eight_hosts), 153.728e-6, kPs);
  // The explanation names the levels of the plan it priced.
  const std::string text = t->explain(Coll::AllReduce, small, 4);
  EXPECT_NE(text.find("hierarchical [ring / - / recdoubling]"), std::string::npos) << text;

  // WEFT_HIER_LEVELS: forced levels are priced as they are; "auto" leaves the choice.
  auto make = [&](const std::string& levels, Status* st) {
    Options o;
    o.tuning_file = f.path();
    o.log_table = false;
    o.online.enabled = false;
    o.hier_levels = levels;
    std::unique_ptr<Tuner> out;
    *st = Tuner::create(8, 2, o, &out);
    return out;
  };
  Status st;
  auto rings = make("ring,auto,ring", &st);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(hier->describe(rings->tailored(*hier, small, 4)), "ring / - / ring");
  // 20.0384 us + 60 us + 1.8 ns * 16 = 80.0672 us
  EXPECT_NEAR(predicted(*rings, "hierarchical", small), 80.0672e-6, kPs);
  auto outer = make(",,rabenseifner", &st);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(hier->describe(outer->tailored(*hier, large, 4)), "ring / - / rabenseifner");
  EXPECT_NEAR(predicted(*outer, "hierarchical", large), 8868.0384e-6, kPs);
  make("ring,tree", &st);
  EXPECT_EQ(st.code(), weftInvalidArgument);
  EXPECT_NE(st.message().find("'tree' is not ring, rabenseifner, recdoubling or auto"), std::string::npos)
      << st.message();
  make("ring,ring,ring,ring", &st);
  EXPECT_NE(st.message().find("more than 3 levels"), std::string::npos) << st.message();
  // recdoubling inside hosts cannot run (the level across hosts would have nothing
  // to do): forced alone, hierarchical is refused and the error names the setting.
  Options o;
  o.algo = "allreduce:hierarchical";
  o.tuning_file = f.path();
  o.log_table = false;
  o.online.enabled = false;
  o.hier_levels = "recdoubling";
  std::unique_ptr<Tuner> inner;
  ASSERT_TRUE(Tuner::create(8, 2, o, &inner).ok());
  const algo::Algorithm* a = nullptr;
  st = inner->choose(Coll::AllReduce, small, 4, &a);
  EXPECT_EQ(st.code(), weftInvalidArgument);
  EXPECT_NE(st.message().find("WEFT_HIER_LEVELS=recdoubling"), std::string::npos) << st.message();
}

// WEFT_ALGO (Options::algo) over table A at 4 ranks; the unforced picks are the
// tests above: recdoubling at 1 float, ring at 1 Mi floats.
TEST(HandCosts, ForcedChoiceOverridesTheModel) {
  TuningFile f(table_a());
  // One name: it runs whatever it costs. tree at 1 float = 4 s (above), the ring 60.0072 us.
  auto tree = tuner(f, 4, 1, "allreduce:tree");
  EXPECT_EQ(choose(*tree, allreduce(4, 1)), "tree");
  EXPECT_EQ(choose(*tree, allreduce(4, 1 << 20)), "tree");
  // recdoubling where the ring is cheaper (11764.0512 us against 7609.7472 us).
  auto rd = tuner(f, 4, 1, "allreduce:recdoubling");
  EXPECT_EQ(choose(*rd, allreduce(4, 1 << 20)), "recdoubling");
  // A list: the cheapest of those listed. tree,ring at 1 float: ring (60.0072 us)
  // although recdoubling (20.0112 us) would win unforced.
  auto list = tuner(f, 4, 1, "tree,ring");
  EXPECT_EQ(choose(*list, allreduce(4, 1)), "ring");
  ASSERT_EQ(list->candidates(Coll::AllReduce, allreduce(4, 1), 4).size(), 2u);
  // An exclusion: without ring, 1 Mi floats go to recdoubling (11764.0512 us; the
  // rest >= 1 s).
  auto not_ring = tuner(f, 4, 1, "^ring");
  EXPECT_EQ(choose(*not_ring, allreduce(4, 1 << 20)), "recdoubling");
  // Unforced, for contrast (same table, same calls).
  auto model = tuner(f, 4, 1);
  EXPECT_EQ(choose(*model, allreduce(4, 1)), "recdoubling");
  EXPECT_EQ(choose(*model, allreduce(4, 1 << 20)), "ring");
}

// The tuning file's per-size entries: from 64 KiB up, recdoubling gets alpha = 0
// and beta = gamma = 0.1 ns/B (table A otherwise). At 4 ranks, 1 Mi floats:
//   recdoubling = 2(0 + N * 0.1 ns + N * 0.1 ns) = 0.4 ns * 4194304 = 1677.7216 us,
//   ring = 7609.7472 us (above): recdoubling now wins. Below 64 KiB nothing changes:
//   at 10001 floats (40004 B) the ring still wins (132.0072 us vs 132.0112 us).
TEST(HandCosts, SizeSegmentOfTheTableApplies) {
  TuningFile f(table_a() + "net allreduce recdoubling 0 65536 0 1e-10 1e-10\n");
  auto t = tuner(f, 4, 1);
  const BuildArgs large = allreduce(4, 1 << 20);
  EXPECT_NEAR(predicted(*t, "recdoubling", large), 1677.7216e-6, kPs);
  EXPECT_EQ(choose(*t, large), "recdoubling");
  EXPECT_NEAR(predicted(*t, "recdoubling", allreduce(4, 10001)), 132.0112e-6, kPs);
  EXPECT_EQ(choose(*t, allreduce(4, 10001)), "ring");
}

}  // namespace
}  // namespace weft::tune

namespace weft::tune {
namespace {

// Two levels: 2 hosts x 4 ranks, each host's ranks taking turns on one network port
// (the communicator's layout of a multi-host job). Within hosts alpha 1 us, beta
// 0.1 ns/B; across alpha 20 us, beta 1 ns/B; gamma 0.2 ns/B. N = 4 MiB (count 2^20).
//   hierarchical: ring reduce-scatter and all-gather inside each host, 3 steps each
//     of N/4 = 1048576 B: 6 (1 us + 104.8576 us) + 3 x 1048576 x 0.2 ns = 635.1456 + 629.1456 us;
//     across: each host's 4 ranks send N/8 = 524288 B twice (reduce-scatter and
//     all-gather of the 2-rank rings), one after another on the port: 8 (20 + 524.288) us
//     = 4354.304 us, the reductions hidden behind the queue (sim_test.cpp derives
//     both). Total 5618.5952 us.
//   ring (flat): ranks 3 and 7 send all 14 chunks of N/8 across, back to back:
//     14 (20 + 524.288) us = 7620.032 us.
constexpr const char* kTwoLevels = "shm * * 0 0 1e-06 1e-10 2e-10\nnet * * 0 0 2e-05 1e-09 2e-10\n";

std::unique_ptr<Tuner> layered_tuner(const TuningFile& f, const sim::Fabric& layout, int local,
                                     const std::string& algo = "allreduce:ring,hierarchical",
                                     const std::string& levels = "") {
  Options o;
  o.algo = algo;
  o.hier_levels = levels;
  o.tuning_file = f.path();
  o.log_table = false;
  o.online.enabled = false;
  o.layout = layout;
  std::unique_ptr<Tuner> t;
  Status st = Tuner::create(layout.nranks, local, o, &t);
  EXPECT_TRUE(st.ok()) << st.message();
  return t;
}

TEST(HandCosts, TwoHostsSimulatedPicksHierarchical) {
  TuningFile f(kTwoLevels);
  auto t = layered_tuner(f, sim::Fabric::host_blocks(8, 4), 4);
  ASSERT_TRUE(t->simulating());
  const BuildArgs b = allreduce(8, 1 << 20, 4);
  EXPECT_NEAR(predicted(*t, "hierarchical", b), 5618.5952e-6, 1e-6 * 5618.5952e-6);
  EXPECT_NEAR(predicted(*t, "ring", b), 7620.032e-6, 1e-6 * 7620.032e-6);
  EXPECT_EQ(choose(*t, b), "hierarchical");
  // The explanation names the simulation and marks the pick.
  const std::string text = t->explain(Coll::AllReduce, b, 4);
  EXPECT_NE(text.find("simulated"), std::string::npos) << text;
  EXPECT_NE(text.find("hierarchical"), std::string::npos) << text;
  EXPECT_NE(text.find("<- pick"), std::string::npos) << text;
}

// Overlapped rounds (BuildArgs::pipeline) where the host links and the network
// cost the same: 2 hosts x 2 ranks, 1 Mi floats in slices of 64 Ki, alpha 1 us,
// beta 1 ns/B everywhere, each host's two ranks taking turns on its network port.
// One level after another a rank's host link carries N/2 each way twice and the
// host's port 2 x N/4 twice: 2 N beta; overlapped, both links carry N each, side by
// side: about N beta plus the rounds' fill and latency, so the rounds are kept. Where the 4 ranks share 2 cores (namespace hosts of one
// kernel) the same bytes would move on the same cores: never chosen, unless
// WEFT_HIER_ROUNDS forces them.
TEST(HandCosts, OverlappedRoundsOnlyWhereTheLinksAreSeparate) {
  TuningFile f("shm * * 0 0 1e-06 1e-09 0\nnet * * 0 0 1e-06 1e-09 0\n");
  BuildArgs b = allreduce(4, 1 << 20, 2);
  b.slice_elems = 1 << 16;
  const algo::Algorithm* hier = algo::find_algorithm(Coll::AllReduce, "hierarchical");
  sim::Fabric apart = sim::Fabric::host_blocks(4, 2);
  auto t = layered_tuner(f, apart, 2);
  const BuildArgs chosen = t->tailored(*hier, b, 4);
  EXPECT_EQ(chosen.pipeline, 8u) << hier->describe(chosen);
  const double N = (1 << 20) * 4.0;
  const double overlapped = predicted(*t, "hierarchical", b);
  EXPECT_GT(overlapped, N * 1e-9);
  EXPECT_LT(overlapped, 1.2 * N * 1e-9);

  sim::Fabric shared = apart;
  sim::set_machines({0, 0, 0, 0}, {{0}, {1}, {0}, {1}}, &shared);
  ASSERT_TRUE(shared.oversubscribed(0));
  EXPECT_EQ(layered_tuner(f, shared, 2)->tailored(*hier, b, 4).pipeline, 0u);
  Options o;
  o.algo = "allreduce:hierarchical";
  o.tuning_file = f.path();
  o.log_table = false;
  o.online.enabled = false;
  o.layout = shared;
  o.hier_rounds = 4;
  std::unique_ptr<Tuner> forced;
  ASSERT_TRUE(Tuner::create(4, 2, o, &forced).ok());
  EXPECT_EQ(forced->tailored(*hier, b, 4).pipeline, 4u);
  o.layout = apart;
  o.hier_rounds = 0;
  std::unique_ptr<Tuner> never;
  ASSERT_TRUE(Tuner::create(4, 2, o, &never).ok());
  EXPECT_EQ(never->tailored(*hier, b, 4).pipeline, 0u);
  EXPECT_NEAR(predicted(*never, "hierarchical", b), 2 * N * 1e-9, 0.05 * 2 * N * 1e-9);
}

// 2 hosts x 2 ranks (bench/topology's 2x2 with its constants): hierarchical and
// chain_tree then move the same messages, so their simulations agree but for
// rounding, and the tie goes to the earlier in the registry (hierarchical), not
// to whichever rounding favours.
TEST(HandCosts, TiesGoToTheEarlierAlgorithm) {
  TuningFile f("shm * * 0 0 2.018e-06 1.227e-10 1e-10\nnet * * 0 0 2.5e-05 4.18848167539267e-09 1e-10\n");
  auto t = layered_tuner(f, sim::Fabric::host_blocks(4, 2), 2, "allreduce:hierarchical,chain_tree");
  for (uint64_t count : {80, 1024, 4096}) {
    const BuildArgs b = allreduce(4, count, 2);
    const double h = predicted(*t, "hierarchical", b), c = predicted(*t, "chain_tree", b);
    EXPECT_NEAR(h, c, 1e-12 * h) << count;
    EXPECT_EQ(choose(*t, b), "hierarchical") << count;
  }
}

// A tuning file's burst line makes each host's network port a token bucket in the
// tuner's simulations (bench/topology's tc tbf: 239 MB/s sustained, 128 KiB at
// 2 GB/s). One-shot at 2 hosts x 2 ranks sends 4 N out of and into each host per
// call; 4 x 64 KiB is twice the burst, so calls back to back drain the buckets, and
// then a call takes as long as the rate needs to refill what it spent: 4 N / r.
// Without the burst line every message also waits its alpha at the rate.
TEST(HandCosts, ABurstLineMakesThePortsTokenBuckets) {
  const double r = 239e6, N = 65536;
  const std::string links = "shm * * 0 0 2e-06 1e-10 1e-10\nnet * * 0 0 2.5e-05 4.1841004184100418e-09 1e-10\n";
  TuningFile bursty(links + "burst net 131072 5e-10\n");
  TuningFile plain(links);
  auto with = layered_tuner(bursty, sim::Fabric::host_blocks(4, 2), 2);
  auto without = layered_tuner(plain, sim::Fabric::host_blocks(4, 2), 2);
  EXPECT_EQ(with->table().net_burst.bytes, 131072);
  const BuildArgs b = allreduce(4, uint64_t(N / 4), 2);
  EXPECT_NEAR(predicted(*with, "oneshot", b), 4 * N / r, 1e-6 * 4 * N / r);
  EXPECT_GT(predicted(*without, "oneshot", b), 4 * N / r + 25e-6);
  // A 4 KiB tree: well under the burst, its two network hops at the line rate.
  const BuildArgs small = allreduce(4, 1024, 2);
  EXPECT_LT(predicted(*with, "tree", small), predicted(*without, "tree", small) - 2 * 4096 * (1 / r - 5e-10) * 0.9);
}

// A tuning file's cores line sets what a message costs the cores where ranks
// outnumber them (sim_test.cpp works the share's effect out by hand): the tuner
// predicts what the simulator gives with that share, and without the line the
// default's.
TEST(HandCosts, ACoresLineSetsTheMessagesCpu) {
  const std::string links = "shm * * 0 0 2e-06 1e-10 1e-10\nnet * * 0 0 2.5e-05 4e-09 1e-10\n";
  TuningFile plain(links);
  TuningFile slow(links + "cores 0.8 1.5e-09\n");
  sim::Fabric f = sim::Fabric::host_blocks(4, 2);
  sim::set_machines({0, 0, 0, 0}, {{0}, {0}, {0}, {0}}, &f);
  ASSERT_TRUE(f.oversubscribed(0));
  f.cost = {algo::LinkCost{2e-6, 1e-10, 1e-10}, algo::LinkCost{2e-6, 1e-10, 1e-10},
            algo::LinkCost{2.5e-5, 4e-9, 1e-10}};
  const BuildArgs b = allreduce(4, 1024, 2);  // 4 KiB: the messages' CPU, not their bytes
  const algo::Algorithm* ring = algo::find_algorithm(Coll::AllReduce, "ring");
  auto simulated = [&](double share, double rx) {
    sim::Fabric g = f;
    g.cpu_share = share, g.net_rx_s_per_byte = rx;
    sim::Result r;
    EXPECT_TRUE(sim::simulate(sched::build_all(b, ring->name, ring->build), g, 4, &r).ok());
    return r.seconds;
  };
  auto t = layered_tuner(slow, f, 2, "allreduce:ring");
  EXPECT_EQ(t->table().cores.cpu_share, 0.8);
  EXPECT_DOUBLE_EQ(predicted(*t, "ring", b), simulated(0.8, 1.5e-9));
  EXPECT_DOUBLE_EQ(predicted(*layered_tuner(plain, f, 2, "allreduce:ring"), "ring", b),
                   simulated(sim::Fabric::kCpuShare, sim::Fabric::kNetRxSPerByte));
  EXPECT_GT(simulated(0.8, 1.5e-9), 1.1 * simulated(sim::Fabric::kCpuShare, sim::Fabric::kNetRxSPerByte));
}

// A tuning file's wire line delays every network message by W in the tuner's
// simulations, holding no port. At 2 hosts x 2 ranks a 16-byte all-reduce by
// recursive doubling crosses hosts in one of its two steps: W more. The ring's 6
// steps each wait for the chunk the previous rank got a step before, so its last
// step ends a chain of 6 consecutive ring edges, 3 of which cross hosts: 3 W and
// the chain's own costs.
// Which the pick follows: at W = 1 ms recursive doubling, whatever else it costs.
TEST(HandCosts, AWireLineDelaysEveryNetworkHop) {
  const double W = 1e-3;
  const std::string links = "shm * * 0 0 2e-06 1e-10 1e-10\nnet * * 0 0 2.5e-05 4e-09 1e-10\n";
  TuningFile wired(links + "wire net 0.001\n");
  TuningFile plain(links);
  const char* both = "allreduce:recdoubling,ring";
  auto with = layered_tuner(wired, sim::Fabric::host_blocks(4, 2), 2, both);
  auto without = layered_tuner(plain, sim::Fabric::host_blocks(4, 2), 2, both);
  EXPECT_EQ(with->table().net_wire_s, W);
  const BuildArgs b = allreduce(4, 4, 2);
  EXPECT_NEAR(predicted(*with, "recdoubling", b) - predicted(*without, "recdoubling", b), W, 1e-12);
  // The ring's slowest chain without the wire may be another than with it: 3 W and
  // at most what it cost before.
  const double ring = predicted(*with, "ring", b), ring_before = predicted(*without, "ring", b);
  EXPECT_GT(ring, 3 * W);
  EXPECT_LE(ring, 3 * W + ring_before);
  EXPECT_EQ(choose(*with, b), "recdoubling");
  // Without a layout the formulas price a call across hosts: W in each of the
  // ring's 2(n-1) alphas. One host's tuner never crosses the wire.
  EXPECT_NEAR(predicted(*tuner(wired, 4, 2), "ring", b) - predicted(*tuner(plain, 4, 2), "ring", b), 6 * W, 1e-12);
  EXPECT_DOUBLE_EQ(predicted(*tuner(wired, 4, 4), "ring", b), predicted(*tuner(plain, 4, 4), "ring", b));
}

TEST(HandCosts, OneHostStaysOnTheFormulas) {
  // All 8 ranks on one host: one level, no simulation, and hierarchical (one node:
  // the ring under another name) is not a candidate unless named.
  TuningFile f(kTwoLevels);
  auto t = layered_tuner(f, sim::Fabric::host_blocks(8, 8), 8, "");
  EXPECT_FALSE(t->simulating());
  EXPECT_EQ(t->link_class(), LinkClass::Shm);
  for (const Prediction& p : t->candidates(Coll::AllReduce, allreduce(8, 1 << 20, 8), 4))
    EXPECT_STRNE(p.algo->name, "hierarchical");
  // ...and every prediction is what a tuner without any layout predicts.
  auto plain = tuner(f, 8, 8);
  for (const Prediction& p : t->candidates(Coll::AllReduce, allreduce(8, 1 << 20, 8), 4))
    EXPECT_DOUBLE_EQ(p.seconds, predicted(*plain, p.algo->name, allreduce(8, 1 << 20, 8))) << p.algo->name;
}

// One host of 8 ranks in 2 NUMA domains of 4 (ranks unbound to a shared link
// between them: each rank's own port). Within a domain alpha 1 us, beta 0.1 ns/B;
// across domains (numa) alpha 4 us, beta 1 ns/B; gamma 0.2 ns/B. N = 4 MiB.
//   hierarchical, three levels with one node, rings at both (WEFT_HIER_LEVELS=ring,ring):
//     inside each domain as the two-host case above, 1264.2912 us; across the 2
//     domains each rank's N/8 = 524288 B once each way, on its own port:
//     2 (4 + 524.288) us + 524288 x 0.2 ns = 1056.576 + 104.8576 us. Total 2425.7248 us.
//   Rabenseifner inside a domain sends each rank one message fewer each way:
//     reduce-scatter N/2 then N/4, each sent and then reduced,
//     (1 + 209.7152 + 419.4304) + (1 + 104.8576 + 209.7152) us, all-gather
//     (1 + 104.8576) + (1 + 209.7152) us: 1262.2912 us, 2 us less: 2423.7248 us in
//     all (WEFT_HIER_LEVELS=rabenseifner,ring), not 10% faster, so the tuner keeps
//     the rings.
//   ring (flat, in domain order): ranks 3 and 7 send all 14 chunks of N/8 across
//     domains, back to back: 14 (4 + 524.288) us = 7396.032 us.
TEST(HandCosts, OneHostTwoNumaDomainsPicksHierarchical) {
  TuningFile f("shm * * 0 0 1e-06 1e-10 2e-10\nnuma * * 0 0 4e-06 1e-09 2e-10\n");
  sim::Generator g;
  g.per_node = 8;
  g.domains = 2;
  g.nics = 0;
  auto t = layered_tuner(f, sim::generate(g), 8, "");
  ASSERT_TRUE(t->simulating());
  EXPECT_EQ(t->link_class(), LinkClass::Shm);
  BuildArgs b = allreduce(8, 1 << 20, 8);
  b.domain_size = 4;
  EXPECT_NEAR(predicted(*t, "hierarchical", b), 2425.7248e-6, 1e-6 * 2425.7248e-6);
  const algo::Algorithm* hier = algo::find_algorithm(Coll::AllReduce, "hierarchical");
  EXPECT_EQ(hier->describe(t->tailored(*hier, b, 4)), "ring / ring / -");
  EXPECT_NEAR(predicted(*t, "ring", b), 7396.032e-6, 1e-6 * 7396.032e-6);
  EXPECT_EQ(choose(*t, b), "hierarchical");
  auto halving = layered_tuner(f, sim::generate(g), 8, "", "rabenseifner,ring");
  EXPECT_NEAR(predicted(*halving, "hierarchical", b), 2423.7248e-6, 1e-6 * 2423.7248e-6);
  EXPECT_EQ(hier->describe(halving->tailored(*hier, b, 4)), "rabenseifner / ring / -");
  const std::string text = t->explain(Coll::AllReduce, b, 4);
  EXPECT_NE(text.find("numa alpha 4 us beta 1 ns/B"), std::string::npos) << text;
  EXPECT_EQ(text.find("net alpha"), std::string::npos) << "one host: no network level\n" << text;
}

}  // namespace
}  // namespace weft::tune

namespace weft::tune {
namespace {

TEST(HandCosts, LargeSchedulesFallBackToTheFormula) {
  // 2 hosts x 128 ranks, 64 Mi floats in 1 MiB slices: the tree's schedule has
  // 256 slices x (8 receives + 8 sends) at its root, x 256 ranks > 500,000 steps, and
  // is predicted by its formula with the net constants; the ring's (2 x 255 chunks
  // of one slice, a send and a receive each, x 256 ranks = 261,120) is simulated.
  TuningFile f(kTwoLevels);
  auto t = layered_tuner(f, sim::Fabric::host_blocks(256, 128), 128, "allreduce:ring,tree");
  ASSERT_TRUE(t->simulating());
  BuildArgs b = allreduce(256, 64u << 20, 128);
  b.slice_elems = (1u << 20) / 4;
  Tuner::Explanation e;
  ASSERT_TRUE(t->explain_terms(Coll::AllReduce, b, 4, &e).ok());
  ASSERT_EQ(e.terms.size(), 2u);
  for (const Tuner::Term& term : e.terms) {
    const bool tree = std::string(term.algo->name) == "tree";
    EXPECT_EQ(term.simulated, !tree) << term.algo->name;
    if (tree) {  // the formula with the file's net constants
      EXPECT_DOUBLE_EQ(term.predicted, term.algo->cost(b, 4, {2e-05, 1e-09, 2e-10}));
    }
  }
}

}  // namespace
}  // namespace weft::tune
