// The simulator against closed forms worked out here, on fabrics built by hand:
// flat fabrics (each rank its own host, no shared port) where every message costs
// alpha + bytes beta and every reduced byte gamma, a two-level fabric for the
// hierarchical all-reduce with and without a shared NIC, and schedules that must
// be rejected. Expected times are written from the schedules' structure, not taken
// from the cost functions (which are compared with them separately).
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/registry.h"
#include "sched/schedule.h"
#include "sched/verify.h"
#include "sim/fabric.h"
#include "sim/simulate.h"

namespace weft::sim {
namespace {

using sched::BuildArgs;
using sched::Coll;

constexpr double kAlpha = 3e-6, kBeta = 1e-9, kGamma = 2e-10;
const algo::LinkCost kCost{kAlpha, kBeta, kGamma};

double simulated(Coll coll, const char* name, int n, uint64_t count, const Fabric& f, int local_size = 0,
                 uint64_t slice = 0) {
  const algo::Algorithm* a = algo::find_algorithm(coll, name);
  EXPECT_NE(a, nullptr) << name;
  BuildArgs args{coll, n, count, 0, slice};
  args.local_size = local_size;
  const sched::Schedule s = sched::build_all(args, name, a->build);
  Result r;
  const Status st = simulate(s, f, 4, &r);
  EXPECT_TRUE(st.ok()) << st.message();
  return r.seconds;
}

double model(Coll coll, const char* name, int n, uint64_t count, const algo::LinkCost& c) {
  const algo::Algorithm* a = algo::find_algorithm(coll, name);
  BuildArgs args{coll, n, count, 0, 0};
  return a->cost(args, 4, c);
}

void expect_near_rel(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-9 * want + 1e-15) << what;
}

TEST(Sim, FlatRingAllReduce) {
  for (int n : {2, 3, 4, 6, 8, 16}) {
    const uint64_t count = 1024 * static_cast<uint64_t>(n);
    const double m = 1024.0 * 4;  // bytes per chunk
    // n-1 reduce-scatter steps (send, receive, reduce), n-1 all-gather steps.
    const double want = (n - 1) * (kAlpha + m * kBeta + m * kGamma) + (n - 1) * (kAlpha + m * kBeta);
    const std::string what = "ring n=" + std::to_string(n);
    expect_near_rel(simulated(Coll::AllReduce, "ring", n, count, Fabric::flat(n, kCost)), want, what);
    expect_near_rel(model(Coll::AllReduce, "ring", n, count, kCost), want, what + " (formula)");
  }
}

TEST(Sim, FlatTreeAllReduce) {
  for (int n : {2, 4, 8, 16}) {
    const uint64_t count = 4096;
    const double N = 4096.0 * 4, lg = std::log2(n);
    // Binomial reduce: the root's last child finishes its subtree after lg(n)-1
    // rounds; each round is a message and a reduction. Then lg(n) rounds down.
    const double want = lg * (kAlpha + N * kBeta + N * kGamma) + lg * (kAlpha + N * kBeta);
    const std::string what = "tree n=" + std::to_string(n);
    expect_near_rel(simulated(Coll::AllReduce, "tree", n, count, Fabric::flat(n, kCost)), want, what);
    expect_near_rel(model(Coll::AllReduce, "tree", n, count, kCost), want, what + " (formula)");
  }
}

// k slices on 2 ranks on 2 hosts, each rank its own port (c = alpha + s beta a
// message, g = s gamma a reduction): the child sends slices 0 and 1 up at once, then each slice
// j+2 when slice j is back down. Worked through the first slices: up j arrives at
// (j+1) c + floor(j/2) g... and slice j is back down at (j+2) c + (floor(j/2)+1) g
// while c >= g, so the call takes (k+1) c + ceil(k/2) g, against k (2c + g) if
// each slice waited for the one before to come down. With a reduction slower than
// a message the root is the bottleneck: its cost() recurrence, worked the same way,
// against the simulator. On more ranks the per-slice formula bounds it from above,
// and no schedule beats the root's lg(n) N beta of sends. On one host each slice
// still waits for the one before: k (2c + g).
TEST(Sim, TreeSendsTheNextSliceUpBeforeTheLastComesDown) {
  const algo::Algorithm* tree = algo::find_algorithm(Coll::AllReduce, "tree");
  ASSERT_NE(tree, nullptr);
  const uint64_t slice = 16384;
  const double s = slice * 4.0, c = kAlpha + s * kBeta, g = s * kGamma;
  for (uint64_t k : {1u, 2u, 3u, 8u, 16u}) {
    const uint64_t count = k * slice;
    const double want = (k + 1) * c + static_cast<double>((k + 1) / 2) * g;
    const std::string what = "tree n=2, " + std::to_string(k) + " slices";
    expect_near_rel(simulated(Coll::AllReduce, "tree", 2, count, Fabric::flat(2, kCost), 1, slice), want, what);
    BuildArgs args{Coll::AllReduce, 2, count, 0, slice};
    args.local_size = 1;
    expect_near_rel(tree->cost(args, 4, kCost), want, what + " (formula)");
    const double one_host = static_cast<double>(k) * (2 * c + g);
    expect_near_rel(simulated(Coll::AllReduce, "tree", 2, count, Fabric::flat(2, kCost), 2, slice), one_host,
                    what + ", one host");
    args.local_size = 2;
    expect_near_rel(tree->cost(args, 4, kCost), one_host,
                    what + ", one host (formula)");
  }
  const algo::LinkCost slow_reduce{kAlpha, kBeta, 10 * kBeta};  // g = 10 s beta > c
  for (uint64_t k : {2u, 5u, 16u}) {
    BuildArgs args{Coll::AllReduce, 2, k * slice, 0, slice};
    args.local_size = 1;
    const sched::Schedule sch = sched::build_all(args, "tree", tree->build);
    Result r;
    ASSERT_TRUE(simulate(sch, Fabric::flat(2, slow_reduce), 4, &r).ok());
    expect_near_rel(r.seconds, tree->cost(args, 4, slow_reduce),
                    "tree n=2, slow reductions, " + std::to_string(k) + " slices");
    EXPECT_GT(r.seconds, k * s * 10 * kBeta);  // the root reduces every slice in turn
  }
  for (int n : {4, 8, 16}) {
    const uint64_t k = 16, count = k * slice;
    const double N = count * 4.0, lg = std::log2(n);
    const double t = simulated(Coll::AllReduce, "tree", n, count, Fabric::flat(n, kCost), 1, slice);
    const std::string what = "tree n=" + std::to_string(n);
    EXPECT_LT(t, 2 * lg * k * kAlpha + 2 * lg * N * kBeta + lg * N * kGamma) << what;
    EXPECT_GT(t, lg * N * kBeta) << what;
  }
}

TEST(Sim, FlatButterflies) {
  for (int n : {2, 4, 8, 16}) {
    const double lg = std::log2(n);
    // Recursive doubling (small counts): lg(n) exchanges of the whole vector.
    const uint64_t small = 256;
    const double Ns = small * 4.0;
    const double rd = lg * (kAlpha + Ns * kBeta + Ns * kGamma);
    expect_near_rel(simulated(Coll::AllReduce, "butterfly", n, small, Fabric::flat(n, kCost)), rd,
                    "butterfly n=" + std::to_string(n));
    expect_near_rel(model(Coll::AllReduce, "butterfly", n, small, kCost), rd, "butterfly formula");
    // Rabenseifner: halving exchanges N/2, N/4, ... reducing each, then doubling back.
    const uint64_t big = 1 << 16;
    const double Nb = big * 4.0, frac = (n - 1.0) / n;
    const double rab = 2 * lg * kAlpha + 2 * frac * Nb * kBeta + frac * Nb * kGamma;
    expect_near_rel(simulated(Coll::AllReduce, "rabenseifner", n, big, Fabric::flat(n, kCost)), rab,
                    "rabenseifner n=" + std::to_string(n));
    expect_near_rel(model(Coll::AllReduce, "rabenseifner", n, big, kCost), rab, "rabenseifner formula");
  }
}

TEST(Sim, PipelinedRingBroadcast) {
  // k slices down a chain of n ranks: the last slice leaves the root after k
  // messages and needs n-2 more hops: (n + k - 2) messages of N/k on the critical path.
  const int n = 6;
  const uint64_t count = 8192, slice = 1024;
  const double k = 8, N = count * 4.0;
  const double want = (n + k - 2) * (kAlpha + N / k * kBeta);
  expect_near_rel(simulated(Coll::Broadcast, "ring", n, count, Fabric::flat(n, kCost), 0, slice), want,
                  "pipelined ring broadcast");
}

// A network's wire holds a message W after its ports have carried it, and no port
// waits for it. Down a chain of n hosts, k slices sent back to back: the last
// slice leaves the root after k messages and takes n-2 more hops, and each of the
// n-1 hops pays W once for all slices: (n + k - 2) messages of N/k + (n - 1) W.
// Each step of the ring all-reduce waits for its chunk, so there every one of its
// 2(n-1) steps pays W: the formula with alpha + W.
TEST(Sim, TheWireDelaysEachHopOnceWhateverFollowsIt) {
  const double W = 1e-3;
  const int n = 6;
  Fabric f = Fabric::flat(n, kCost);
  f.net_wire_s = W;
  const uint64_t count = 8192, slice = 1024;
  const double k = 8, N = count * 4.0;
  expect_near_rel(simulated(Coll::Broadcast, "ring", n, count, f, 0, slice),
                  (n + k - 2) * (kAlpha + N / k * kBeta) + (n - 1) * W, "pipelined ring broadcast over a wire");
  const uint64_t ring_count = 1024 * n;
  const double m = 1024.0 * 4;
  const double ring = (n - 1) * (kAlpha + W + m * kBeta + m * kGamma) + (n - 1) * (kAlpha + W + m * kBeta);
  expect_near_rel(simulated(Coll::AllReduce, "ring", n, ring_count, f), ring, "ring all-reduce over a wire");
  expect_near_rel(model(Coll::AllReduce, "ring", n, ring_count, {kAlpha + W, kBeta, kGamma}), ring,
                  "ring all-reduce, the formula with alpha + W");
  // Within a host nothing crosses the wire: 2 hosts x 3 ranks, a broadcast from
  // rank 0 down the host-grouped chain crosses it once (ranks 2 -> 3).
  Fabric two = Fabric::host_blocks(6, 3);
  two.cost = {kCost, kCost, kCost};
  const double without = simulated(Coll::Broadcast, "ring", 6, count, two, 3, slice);
  two.net_wire_s = W;
  expect_near_rel(simulated(Coll::Broadcast, "ring", 6, count, two, 3, slice), without + W,
                  "one crossing of the wire on 2 hosts");
}

// 2 hosts x 4 ranks, one domain each, no shared port: alpha 1 us and beta 0.1 ns/B
// within a host, 20 us and 1 ns/B across.
Generator two_hosts_of_four() {
  Generator g;
  g.nodes = 2;
  g.per_node = 4;
  g.nics = 0;
  g.intra = {1e-6, 1e-10, kGamma};
  g.cross = g.intra;
  g.inter = {20e-6, 1e-9, kGamma};
  return g;
}

TEST(Sim, HierarchicalTwoLevels) {
  // 2 hosts x 4 ranks, one domain per host: ring reduce-scatter and all-gather
  // inside (3 steps each of N/4), ring all-reduce of N/4 across (1 step each way of N/8).
  Generator g = two_hosts_of_four();
  const uint64_t count = 1 << 16;
  const double N = count * 4.0, L = 4, M = 2;
  const double intra = 2 * (L - 1) * (g.intra.alpha_s + N / L * g.intra.beta_s_per_byte) + (L - 1) * N / L * kGamma;
  const double inter_one = g.inter.alpha_s + N / (L * M) * g.inter.beta_s_per_byte;
  const double inter = 2 * (M - 1) * inter_one + (M - 1) * N / (L * M) * kGamma;
  Fabric own_ports = generate(g);
  EXPECT_EQ(own_ports.levels_used(), 2);
  expect_near_rel(simulated(Coll::AllReduce, "hierarchical", 8, count, own_ports, 4), intra + inter,
                  "hierarchical, a network port per rank");
  // One NIC per host as fast as one rank's port: the 4 ranks' cross-host messages
  // of each step go one after another, and the NIC never idles between the two
  // steps: the reduction of each rank's part overlaps the later ranks' messages,
  // so no gamma term is left on the critical path.
  g.nics = 1;
  g.nic_bytes_per_s = 1 / g.inter.beta_s_per_byte;
  const double shared = 2 * (M - 1) * L * inter_one;
  expect_near_rel(simulated(Coll::AllReduce, "hierarchical", 8, count, generate(g), 4), intra + shared,
                  "hierarchical, one NIC per host");
  // A NIC four times as fast has four lanes: no queueing again.
  g.nic_bytes_per_s = 4 / g.inter.beta_s_per_byte;
  expect_near_rel(simulated(Coll::AllReduce, "hierarchical", 8, count, generate(g), 4), intra + inter,
                  "hierarchical, a 4-lane NIC");
}

TEST(Sim, HierarchicalThreeLevels) {
  // 2 hosts x 2 NUMA domains x 2 ranks, each level its own costs: the ring phases
  // run one after another, each a single step of 2 ranks each way: N/2 inside the
  // domain, N/4 across the host's domains, N/8 across hosts.
  Generator g = two_hosts_of_four();
  g.domains = 2;
  g.cross = {4e-6, 4e-10, kGamma};
  const uint64_t count = 1 << 16;
  const double N = count * 4.0;
  auto step = [&](const algo::LinkCost& c, double bytes) {
    return 2 * (c.alpha_s + bytes * c.beta_s_per_byte) + bytes * kGamma;
  };
  const double want = step(g.intra, N / 2) + step(g.cross, N / 4) + step(g.inter, N / 8);
  const Fabric f = generate(g);
  EXPECT_EQ(f.levels_used(), 3);
  EXPECT_EQ(block_size(f), 4);
  EXPECT_EQ(domain_block_size(f), 2);
  const algo::Algorithm* a = algo::find_algorithm(Coll::AllReduce, "hierarchical");
  BuildArgs args{Coll::AllReduce, 8, count, 0, 0};
  args.local_size = 4;
  args.domain_size = 2;
  Result r;
  ASSERT_TRUE(simulate(sched::build_all(args, "hierarchical", a->build), f, 4, &r).ok());
  expect_near_rel(r.seconds, want, "hierarchical, three levels");
  // The two-level schedule on the same machine sends N/4 x 3 steps each way
  // inside the host, two of the three steps of each crossing domains.
  args.domain_size = 0;
  ASSERT_TRUE(simulate(sched::build_all(args, "hierarchical", a->build), f, 4, &r).ok());
  EXPECT_GT(r.seconds, want);
}

// Hierarchical's level variants on a flat fabric (every link alike, no shared
// port): the levels run one after another, each as its flat counterpart among its
// group on its share B of the vector (B = N, N/D, N/L):
//   ring         2(m-1) alpha + 2(m-1)/m B beta + (m-1)/m B gamma
//   rabenseifner 2 lg(m) alpha + 2(m-1)/m B beta + (m-1)/m B gamma
//   recdoubling  lg(m) (alpha + B beta + B gamma)
// and the simulation and hierarchical's cost() both equal the sum.
TEST(Sim, HierarchicalLevelVariantsOnAFlatFabric) {
  const algo::Algorithm* a = algo::find_algorithm(Coll::AllReduce, "hierarchical");
  auto level = [](sched::LevelAlgo algo, double m, double B) {
    if (m <= 1) return 0.0;
    const double lg = std::log2(m), frac = (m - 1) / m;
    switch (algo) {
      case sched::LevelAlgo::Ring:
        return 2 * (m - 1) * kAlpha + 2 * frac * B * kBeta + frac * B * kGamma;
      case sched::LevelAlgo::Rabenseifner:
        return 2 * lg * kAlpha + 2 * frac * B * kBeta + frac * B * kGamma;
      case sched::LevelAlgo::RecDoubling:
        return lg * (kAlpha + B * kBeta + B * kGamma);
    }
    return 0.0;
  };
  int checked = 0;
  for (auto [n, L, D] : {std::array<int, 3>{16, 4, 0}, {16, 8, 2}, {8, 2, 0}, {32, 8, 4}, {12, 4, 2}}) {
    BuildArgs args{Coll::AllReduce, n, 4096 * static_cast<uint64_t>(n), 0, 0};
    args.local_size = L;
    args.domain_size = D;
    const int dom = D > 0 ? D : L;
    const double N = args.count * 4.0, m[3] = {double(dom), double(L / dom), double(n / L)};
    for (const BuildArgs& v : a->variants(args, {})) {
      const double want = level(v.levels[0], m[0], N) + level(v.levels[1], m[1], N / m[0]) +
                          level(v.levels[2], m[2], N / L);
      const std::string what = "hierarchical n=" + std::to_string(n) + " L=" + std::to_string(L) +
                               " D=" + std::to_string(D) + " [" + a->describe(v) + "]";
      Result r;
      ASSERT_TRUE(simulate(sched::build_all(v, "hierarchical", a->build), Fabric::flat(n, kCost), 4, &r).ok());
      expect_near_rel(r.seconds, want, what);
      expect_near_rel(a->cost(v, 4, kCost), want, what + " (formula)");
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

TEST(Sim, FlatRingCrossesTheSlowLinkEveryStep) {
  // The same 2 x 4 machine: ranks 3 and 7 send every one of their 2(n-1) chunks
  // across hosts, and each gets its next chunk over a fast link before its port is
  // free again, so their ports are busy back to back and the reductions hide.
  Generator g = two_hosts_of_four();
  const uint64_t count = 1 << 16;
  const double m = count * 4.0 / 8;
  const double want = 14 * (g.inter.alpha_s + m * g.inter.beta_s_per_byte);
  expect_near_rel(simulated(Coll::AllReduce, "ring", 8, count, generate(g)), want, "flat ring on 2 hosts");
}

// Double binary tree, many slices: a rank interior in one tree receives its two
// children's halves (N) and both trees' broadcasts (N), so its port needs 2N beta,
// and it reduces N. With both directions of both trees pipelined, the call takes
// that plus the pipeline's fill (up and down the trees: 2d hops of a slice) and a
// margin for ranks near the ends that are interior in both trees (2.5N). Taking
// each slice up and down both trees before the next (slice by slice) was 1.3x
// (n = 4) to 3.6x (n = 128) this bound.
TEST(Sim, DoubleTreePipelinesBothDirections) {
  const uint64_t slice = 16384, count = 64 * 2 * slice;  // 64 slices per half
  const double N = count * 4.0, s = slice * 4.0;
  for (int n : {4, 8, 16, 32, 64, 128}) {
    const double d = std::floor(std::log2(n));
    const double bound = 1.3 * (2 * N * kBeta + N * kGamma) + 2 * d * (kAlpha + s * kBeta);
    const double t = simulated(Coll::AllReduce, "double_tree", n, count, Fabric::flat(n, kCost), 0, slice);
    EXPECT_LT(t, bound) << "double_tree n=" << n;
    EXPECT_GT(t, 2 * N * kBeta) << "double_tree n=" << n;  // below the busiest port's bytes: impossible
  }
}

// chain_tree on 16 hosts x 8 ranks, each rank its own network port, links inside
// hosts 100x faster: only the chains' heads cross hosts, one per tree and host,
// four trees of a quarter each (two pairs). A head interior in the tree across
// hosts receives its two children's quarters and its parent's broadcast (1.5 N/4
// of network bytes) and sends as much: no schedule beats 0.375 N beta. One pair
// (two heads a host, halves) took 1.5 N beta plus the fill, within 1.3x (slice by
// slice, each slice passing through both chains of every host before the next,
// 2.5x); two pairs must not be slower than that bound. Each rank runs one sequence
// of steps, so a head's waits across hosts hold up its chain work for the other
// trees: the two pairs take about 2.4x their bound, 0.6x one pair's.
TEST(Sim, ChainTreeKeepsTheHeadsBusy) {
  Generator g;
  g.nodes = 16;
  g.per_node = 8;
  g.nics = 0;
  g.intra = {1e-6, 1e-11, 0};
  g.cross = g.intra;
  g.inter = {5e-6, 1e-9, 0};
  const uint64_t slice = 16384, count = 64 * 2 * slice;
  const double N = count * 4.0, s = slice * 4.0;
  const double hops = 2 * (7 + 4);  // up and down: the chain of 8, then lg 16 levels across
  const double bound = 1.3 * 1.5 * N * g.inter.beta_s_per_byte + hops * (g.inter.alpha_s + s * g.inter.beta_s_per_byte);
  const double t = simulated(Coll::AllReduce, "chain_tree", 128, count, generate(g), 8, slice);
  EXPECT_LT(t, 0.7 * 1.5 * N * g.inter.beta_s_per_byte);
  EXPECT_LT(t, bound);
  EXPECT_GT(t, 0.375 * N * g.inter.beta_s_per_byte);
}

// rings (NCCL's channels) on 2 hosts x 4 ranks, each rank its own network port,
// links inside hosts 100x faster: the ring crosses each host boundary from one
// rank, which sends 2(n-1)/n N = 1.75 N across; the 4 rings leave each host from 4
// different ranks with a quarter each, 0.4375 N, so the call takes 0.4375 N beta
// of the network (0.875 if a port's sends and receives took turns) plus the fill,
// against the ring's 1.75 N beta.
TEST(Sim, RingsCrossHostsFromDifferentRanks) {
  Generator g;
  g.nodes = 2;
  g.per_node = 4;
  g.nics = 0;
  g.intra = {1e-7, 1e-11, 0};
  g.cross = g.intra;
  g.inter = {1e-7, 1e-9, 0};
  const uint64_t slice = 16384, count = 4 * 8 * 64 * slice;
  const double N = count * 4.0, b = g.inter.beta_s_per_byte;
  const double ring = simulated(Coll::AllReduce, "ring", 8, count, generate(g), 4, slice);
  const double rings = simulated(Coll::AllReduce, "rings", 8, count, generate(g), 4, slice);
  EXPECT_GT(ring, 1.75 * N * b);
  EXPECT_LT(ring, 1.1 * 1.75 * N * b);
  EXPECT_GT(rings, 0.4375 * N * b);
  EXPECT_LT(rings, 1.1 * 0.875 * N * b);
}

// Hierarchical with its levels overlapped in rounds, 2 hosts x 2 ranks, rings,
// no latency or reduction cost, every link b per byte and a port per rank and
// level. Round j's phases (reduce-scatter in the host: N/2R, across: N/4R each
// way, all-gather in the host: N/2R) run at times j, j+1, j+2, j+3, each time's
// messages sent together, so a time lasts as long as its busiest port: the host
// link, which carries one or two N/2R messages at every time. Its 2R messages
// end after N b, against 1.5 N b with the levels one after another.
TEST(Sim, HierarchicalRoundsOverlapTheLevels) {
  Generator g;
  g.nodes = 2;
  g.per_node = 2;
  g.nics = 0;
  g.intra = {0, 1e-9, 0};
  g.cross = g.intra;
  g.inter = g.intra;
  const algo::Algorithm* a = algo::find_algorithm(Coll::AllReduce, "hierarchical");
  BuildArgs args{Coll::AllReduce, 4, 1 << 16, 0, 0};
  args.local_size = 2;
  const double N = (1 << 16) * 4.0;
  for (uint32_t rounds : {0u, 4u, 8u}) {
    args.pipeline = rounds;
    Result r;
    ASSERT_TRUE(simulate(sched::build_all(args, "hierarchical", a->build), generate(g), 4, &r).ok());
    expect_near_rel(r.seconds, (rounds ? 1.0 : 1.5) * N * 1e-9, "rounds " + std::to_string(rounds));
  }
}

// Every rank's whole input to every other rank (oneshot) on 2 hosts x 2 ranks with
// one network port per host and free links inside hosts: each port carries its
// host's 4 cross-host messages of N bytes each way back to back, so the call takes
// 4 (alpha + N beta). A message that reserved both hosts' ports end to end would
// leave one idle while the other finished another message (about twice as long).
TEST(Sim, ConcurrentMessagesShareTheLinks) {
  Generator g;
  g.nodes = 2;
  g.per_node = 2;
  g.nics = 1;
  g.intra = {0, 0, 0};
  g.cross = g.intra;
  g.inter = {20e-6, 1e-9, 0};
  g.nic_bytes_per_s = 1 / g.inter.beta_s_per_byte;
  const uint64_t count = 1 << 18;
  const double N = count * 4.0;
  expect_near_rel(simulated(Coll::AllReduce, "oneshot", 4, count, generate(g)), 4 * (20e-6 + N * 1e-9),
                  "oneshot on 2 hosts x 2 ranks, one port per host");
}

// A rank's message to a rank on its own host does not wait behind its messages
// across hosts: rank 1 sends 1 MiB to rank 2 (other host), then 4 KiB to rank 0.
TEST(Sim, ARankHasAPortPerLevel) {
  using sched::Buf;
  using sched::Kind;
  Generator g = two_hosts_of_four();
  g.per_node = 2;
  const sched::Range big{Buf::Recv, 0, 1 << 18}, small{Buf::Recv, 0, 1 << 10};
  sched::Schedule s;
  s.args = BuildArgs{Coll::AllReduce, 4, 1 << 18, 0, 0};
  s.algo = "hand-made";
  s.ranks.resize(4);
  s.ranks[0].steps = {{Kind::Recv, 1, small, {}}};
  s.ranks[1].steps = {{Kind::Send, 2, {}, big}, {Kind::Send, 0, {}, small}};
  s.ranks[2].steps = {{Kind::Recv, 1, big, {}}};
  Result r;
  const Status st = simulate(s, generate(g), 4, &r);
  ASSERT_TRUE(st.ok()) << st.message();
  expect_near_rel(r.rank_seconds[0], 1e-6 + 4096 * 1e-10, "rank 0: the 4 KiB message within the host");
  expect_near_rel(r.rank_seconds[2], 20e-6 + 1048576 * 1e-9, "rank 2: the 1 MiB message across hosts");
}

// Four ranks on one machine, each sending one message to the next and receiving
// one from the previous (alpha 10 us, no bytes), a share of 0.4: each message
// takes 4 us of a core at each end and 2 us of link. With a core per rank that is
// the plain alpha (10 us); with fewer, the 8 pieces of 4 us queue for the cores:
// 2 cores, 16 us; 1 core, 32 us (worked through step by step, in time order).
// On a slower kernel, a share of 0.8: each message takes 8 us of a core at each end,
// and its link's part, 10 - 16 us, is none rather than negative. On 2 cores: ranks
// 0 and 1 send at 0-8 us, 2 and 3 at 8-16; ranks 1 and 2 receive at 16-24 (their
// messages arrived at 8), 3 and 0 at 24-32: 32 us (with a part of -6 us on the
// link, 3's and 0's messages would have arrived by 10 and the end be the same, so
// 1 core: 64 us, all CPU, and the plain 10 us with a core per rank).
TEST(Sim, RanksOutnumberingTheCoresQueueForThem) {
  using sched::Buf;
  using sched::Kind;
  const sched::Range one{Buf::Recv, 0, 1};
  sched::Schedule s;
  s.args = BuildArgs{Coll::AllReduce, 4, 1, 0, 0};
  s.algo = "hand-made";
  s.ranks.resize(4);
  for (int r = 0; r < 4; ++r)
    s.ranks[size_t(r)].steps = {{Kind::Send, (r + 1) % 4, {}, one}, {Kind::Recv, (r + 3) % 4, one, {}}};
  struct Case {
    double share;
    int cores;
    double want;
  };
  for (const Case& c : std::vector<Case>{
           {0.4, 4, 10e-6}, {0.4, 2, 16e-6}, {0.4, 1, 32e-6}, {0.8, 4, 10e-6}, {0.8, 2, 32e-6}, {0.8, 1, 64e-6}}) {
    Fabric f = Fabric::flat(4, {10e-6, 0, 0});
    f.machine = {0, 0, 0, 0};
    f.machine_cores = {c.cores};
    f.cpu_share = c.share;
    f.net_rx_s_per_byte = 0;  // alpha's shares alone (the next test: the bytes)
    Result r;
    const Status st = simulate(s, f, 4, &r);
    ASSERT_TRUE(st.ok()) << st.message();
    expect_near_rel(r.seconds, c.want, "share " + std::to_string(c.share) + ", " + std::to_string(c.cores) + " cores");
  }
  Fabric f = Fabric::flat(4, {10e-6, 0, 0});
  f.cpu_share = 1.01;
  Result r;
  EXPECT_EQ(simulate(s, f, 4, &r).code(), weftInvalidArgument);
}

// Two ranks on hosts of one machine swap 1 MB (alpha 10 us, beta 1 ns a byte, no
// alpha on the cores). Where they share one core, each receive takes 0.5 ns a
// byte of it: both messages arrive at 10 us + 1 ms, then the receives take the
// core in turn, 0.5 ms each: 2.01 ms. With a core per rank (2 cores, or machines
// not modelled) it is the plain model: 1.01 ms.
TEST(Sim, NetworkBytesReceivedTakeTheSharedCores) {
  using sched::Buf;
  using sched::Kind;
  const sched::Range mb{Buf::Recv, 0, 250000};  // x 4 bytes
  sched::Schedule s;
  s.args = BuildArgs{Coll::AllReduce, 2, 250000, 0, 0};
  s.algo = "hand-made";
  s.ranks.resize(2);
  for (int r = 0; r < 2; ++r) s.ranks[size_t(r)].steps = {{Kind::Send, 1 - r, {}, mb}, {Kind::Recv, 1 - r, mb, {}}};
  for (const auto& [cores, want] :
       std::vector<std::pair<int, double>>{{1, 2.01e-3}, {2, 1.01e-3}, {0, 1.01e-3}}) {
    Fabric f = Fabric::flat(2, {10e-6, 1e-9, 0});
    if (cores > 0) {
      f.machine = {0, 0};
      f.machine_cores = {cores};
    }
    f.cpu_share = 0;
    f.net_rx_s_per_byte = 0.5e-9;
    Result r;
    const Status st = simulate(s, f, 4, &r);
    ASSERT_TRUE(st.ok()) << st.message();
    expect_near_rel(r.seconds, want, cores > 0 ? std::to_string(cores) + " core(s)" : "a core each");
  }
}

// Machines from a topology: hosts naming one machine share the CPUs their ranks
// may run on; a host naming none is a machine of its own.
TEST(Sim, MachinesFromATopology) {
  topo::System s;
  for (const char* id : {"a", "b", "c"}) {
    topo::Host h;
    h.identity = id;
    h.machine = std::string(id) == "c" ? "" : "kernel-1";
    s.hosts.push_back(h);
  }
  // Hosts a and b: 4 ranks on CPUs 0 and 1; host c: 2 ranks on 4 CPUs.
  s.ranks = {{0, 1, "0", {}, "", {}, {}}, {0, 2, "1", {}, "", {}, {}}, {1, 3, "0-1", {}, "", {}, {}},
             {1, 4, "1", {}, "", {}, {}}, {2, 5, "0-3", {}, "", {}, {}}, {2, 6, "0-3", {}, "", {}, {}}};
  const Fabric f = from_system(s, kCost, kCost, kCost);
  EXPECT_EQ(f.machine, (std::vector<int>{0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(f.machine_cores, (std::vector<int>{2, 4}));
  EXPECT_TRUE(f.oversubscribed(0));
  EXPECT_FALSE(f.oversubscribed(4));
  EXPECT_EQ(f.check(), "");
}

sched::Schedule two_rank(std::vector<sched::Step> r0, std::vector<sched::Step> r1) {
  sched::Schedule s;
  s.args = BuildArgs{Coll::AllReduce, 2, 4, 0, 0};
  s.algo = "hand-made";
  s.ranks.resize(2);
  s.ranks[0].steps = std::move(r0);
  s.ranks[1].steps = std::move(r1);
  return s;
}

TEST(Sim, RejectsDeadlockAndMismatch) {
  using sched::Buf;
  using sched::Kind;
  const sched::Range r4{Buf::Recv, 0, 4}, r2{Buf::Recv, 0, 2};
  Result res;
  Status st = simulate(two_rank({{Kind::Recv, 1, r4, {}}}, {{Kind::Recv, 0, r4, {}}}), Fabric::flat(2, kCost), 4, &res);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("deadlock"), std::string::npos) << st.message();
  st = simulate(two_rank({{Kind::Send, 1, {}, r4}}, {{Kind::Recv, 0, r2, {}}}), Fabric::flat(2, kCost), 4, &res);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("receives 2 elements from rank 0, which sent 4"), std::string::npos) << st.message();
  st = simulate(two_rank({{Kind::Send, 1, {}, r4}}, {}), Fabric::flat(2, kCost), 4, &res);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("nobody received"), std::string::npos) << st.message();
  st = simulate(two_rank({}, {}), Fabric::flat(3, kCost), 4, &res);
  EXPECT_FALSE(st.ok());
}

// A network port that is a token bucket (tc tbf: sustained rate r, up to B bytes
// saved up while idle at the line rate), two hosts exchanging m bytes per call,
// calls back to back. From the bucket's definition: a call whose bytes the refill
// covers goes at the line rate, alpha + m / line; calls that spend more than the
// refill drain it, and then the tokens gained over a call (r T) equal the bytes
// sent (m), so T = m / r whatever alpha and the line rate are; without a bucket
// every call takes alpha + m / r.
TEST(Sim, TokenBucketPacesBackToBackCalls) {
  using sched::Buf;
  using sched::Kind;
  const double alpha = 25e-6, rate = 239e6, line = 2e9;
  auto period = [&](uint64_t bytes, double burst) {
    const sched::Range all{Buf::Recv, 0, bytes / 4};
    Fabric f = Fabric::host_blocks(2, 1);
    f.cost = {kCost, kCost, algo::LinkCost{alpha, 1 / rate, 0}};
    for (Port& p : f.nics) p.burst_bytes = burst, p.line_bytes_per_s = line;
    Result r;
    const Status st = simulate(two_rank({{Kind::Send, 1, {}, all}, {Kind::Recv, 1, all, {}}},
                                        {{Kind::Send, 0, {}, all}, {Kind::Recv, 0, all, {}}}),
                               f, 4, &r);
    EXPECT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(r.messages, 2u);
    return r.seconds;
  };
  const double B = 128 * 1024;
  // 4 KiB: the refill over alpha + m / line (6.5 KB) covers it.
  expect_near_rel(period(4096, B), alpha + 4096 / line, "4 KiB, bucket never drained");
  // 16 KiB, 64 KiB, 1 MiB: drained, by a few KB a call at 16 KiB.
  for (uint64_t m : {16384u, 65536u, 1u << 20})
    expect_near_rel(period(m, B), m / rate, std::to_string(m) + " B, bucket drained");
  for (uint64_t m : {4096u, 65536u}) expect_near_rel(period(m, 0), alpha + m / rate, "no bucket");
}

// Rank 0 sends 10 MB across hosts (alpha 10 us, beta 1 ns a byte) to rank 1,
// which copies for 20 ms (2 ns a byte of 10 MB) before it receives. 4 MB go
// when sent; the other 6 MB once rank 1 reads, at 20 ms: they arrive at
// 20 ms + 10 us + 6 ms. With every byte eager the message is there at 10.01 ms
// and rank 1 is done when its copy is, at 20 ms.
TEST(Sim, LargeNetworkMessagesWaitForTheReceiver) {
  using sched::Buf;
  using sched::Kind;
  const sched::Range msg{Buf::Recv, 0, 2500000}, scratch{Buf::Send, 0, 2500000};  // x 4 bytes
  const sched::Schedule s =
      two_rank({{Kind::Send, 1, {}, msg}}, {{Kind::Copy, -1, scratch, msg}, {Kind::Recv, 0, msg, {}}});
  for (const auto& [eager, want] : std::vector<std::pair<uint64_t, double>>{{4000000, 26.01e-3}, {UINT64_MAX, 20e-3}}) {
    Fabric f = Fabric::host_blocks(2, 1);
    f.cost = {kCost, kCost, algo::LinkCost{10e-6, 1e-9, 0}};
    f.copy_s_per_byte = 2e-9;
    f.eager_bytes = eager;
    Result r;
    const Status st = simulate(s, f, 4, &r);
    ASSERT_TRUE(st.ok()) << st.message();
    expect_near_rel(r.rank_seconds[1], want, "eager " + std::to_string(eager) + " bytes");
  }
}

// A token bucket shapes what its host sends (tc's tbf on the host's interface),
// not what it receives: two hosts each sending 1 MB to a third at once, calls
// back to back, take alpha + m / r a call (each sender's own bucket; its 1-byte
// burst changes that by at most a byte's time), not the 2 m / r of the third's
// port carrying both at the sustained rate.
TEST(Sim, TokenBucketShapesWhatAHostSends) {
  using sched::Buf;
  using sched::Kind;
  const double alpha = 25e-6, rate = 239e6, line = 2e9, m = 1e6;
  const sched::Range all{Buf::Recv, 0, 250000};  // x 4 bytes
  sched::Schedule s;
  s.args = BuildArgs{Coll::AllReduce, 3, 250000, 0, 0};
  s.algo = "hand-made";
  s.ranks.resize(3);
  s.ranks[0].steps = {{Kind::Recv, 1, all, {}}, {Kind::Recv, 2, all, {}}};
  s.ranks[1].steps = {{Kind::Send, 0, {}, all}};
  s.ranks[2].steps = {{Kind::Send, 0, {}, all}};
  Fabric f = Fabric::host_blocks(3, 1);
  f.cost = {kCost, kCost, algo::LinkCost{alpha, 1 / rate, 0}};
  for (Port& p : f.nics) p.burst_bytes = 1, p.line_bytes_per_s = line;
  Result r;
  const Status st = simulate(s, f, 4, &r);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_NEAR(r.seconds, alpha + m / rate, 2 / rate);
}

TEST(Sim, ThousandRanksGigabyteRingIsFast) {
  // 1,024 ranks on 128 hosts of 8, 1 GiB of fp32, ring with 1 MiB slices:
  // ~2 million messages. The bound is loose for a loaded 2-core VM.
  Generator g;
  g.nodes = 128;
  g.per_node = 8;
  g.nics = 4;
  g.nic_bytes_per_s = 50e9;
  g.intra = {1e-6, 1.0 / 300e9, 0};
  g.cross = g.intra;
  g.inter = {5e-6, 1.0 / 50e9, 0};
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t count = (1ull << 30) / 4;
  const double t = simulated(Coll::AllReduce, "ring", 1024, count, generate(g), 0, (1 << 20) / 4);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(wall, 60.0);
  // Bounded below by the bandwidth of the slowest link every byte crosses:
  // 2 (n-1)/n N over 50 GB/s.
  EXPECT_GT(t, 2 * 1023.0 / 1024 * (1ull << 30) / 50e9);
  std::printf("1024 ranks x 1 GiB ring: simulated %.3f ms in %.2f s\n", t * 1e3, wall);
}

TEST(Sim, Bandwidths) {
  double b = 0;
  ASSERT_TRUE(parse_bandwidth("300GB/s", &b));
  EXPECT_DOUBLE_EQ(b, 300e9);
  ASSERT_TRUE(parse_bandwidth("25Gb/s", &b));
  EXPECT_DOUBLE_EQ(b, 25e9 / 8);
  ASSERT_TRUE(parse_bandwidth("12.5MB/s", &b));
  EXPECT_DOUBLE_EQ(b, 12.5e6);
  EXPECT_FALSE(parse_bandwidth("fast", &b));
  EXPECT_FALSE(parse_bandwidth("10GB", &b));
  EXPECT_FALSE(parse_bandwidth("-1GB/s", &b));
}

TEST(Sim, GeneratorLayout) {
  Generator g;
  g.nodes = 2;
  g.per_node = 8;
  g.domains = 2;
  g.nics = 4;
  const Fabric f = generate(g);
  ASSERT_EQ(f.nranks, 16);
  EXPECT_EQ(f.level(0, 3), Level::Domain);
  EXPECT_EQ(f.level(3, 4), Level::Host);
  EXPECT_EQ(f.level(7, 8), Level::Network);
  EXPECT_EQ(f.nic[0], 0);
  EXPECT_EQ(f.nic[1], 0);
  EXPECT_EQ(f.nic[2], 1);
  EXPECT_EQ(f.nic[15], 7);
  EXPECT_EQ(f.levels_used(), 3);
  EXPECT_EQ(Fabric::flat(4, kCost).levels_used(), 1);
  EXPECT_EQ(f.check(), "");
}

}  // namespace
}  // namespace weft::sim

namespace weft::sim {
namespace {

TEST(SimOrder, GroupsRoundRobinRanksByHost) {
  // 8 ranks placed round robin on 2 hosts, each host's ranks taking turns on one port.
  Fabric f = Fabric::host_blocks(8, 4);
  for (int r = 0; r < 8; ++r) f.host[size_t(r)] = f.domain[size_t(r)] = f.nic[size_t(r)] = r % 2;
  f.nics.resize(2);
  f.cost = {algo::LinkCost{1e-6, 1e-10, 0}, algo::LinkCost{1e-6, 1e-10, 0}, algo::LinkCost{20e-6, 1e-9, 0}};
  const std::vector<int> order = grouped_order(f);
  EXPECT_EQ(order, (std::vector<int>{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_EQ(block_size(f), 0);
  const Fabric g = reordered(f, order);
  EXPECT_EQ(block_size(g), 4);
  EXPECT_EQ(g.host, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(grouped_order(g), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  // A flat ring in rank order crosses hosts at every hop: each host's 4 ranks take
  // turns on its port, 4 x 14 messages of N/8. In grouped order 2 hops cross:
  // 14 back to back (FlatRingCrossesTheSlowLinkEveryStep).
  const uint64_t count = 1 << 16;
  const double one = 20e-6 + count * 4.0 / 8 * 1e-9;
  const algo::Algorithm* ring = algo::find_algorithm(Coll::AllReduce, "ring");
  const sched::Schedule s = sched::build_all(BuildArgs{Coll::AllReduce, 8, count, 0, 0}, "ring", ring->build);
  Result cyclic, grouped;
  ASSERT_TRUE(simulate(s, f, 4, &cyclic).ok());
  ASSERT_TRUE(simulate(s, g, 4, &grouped).ok());
  EXPECT_NEAR(grouped.seconds, 14 * one, 1e-9 * 14 * one);
  EXPECT_GT(cyclic.seconds, 3.5 * grouped.seconds);
  EXPECT_LE(cyclic.seconds, 4 * 14 * one * (1 + 1e-9));
}

TEST(SimOrder, RelabeledSchedulesStayCorrect) {
  // A plan built for position p of an order and relabeled is the same schedule on
  // other rank numbers: the verifier accepts it, roots included.
  const std::vector<int> order{0, 2, 4, 1, 3, 5};
  std::vector<int> pos(order.size());
  for (size_t i = 0; i < order.size(); ++i) pos[size_t(order[i])] = int(i);
  for (Coll coll : {Coll::AllReduce, Coll::Broadcast, Coll::Reduce})
    for (const algo::Algorithm* a : algo::algorithms_for(coll)) {
      const int root = 3;  // a real rank; position pos[3] in the order
      BuildArgs logical{coll, 6, 1000, pos[root], 64};
      if (!algo::supports(*a, logical)) continue;
      sched::Schedule real;
      real.args = BuildArgs{coll, 6, 1000, root, 64};
      real.algo = a->name;
      real.ranks.resize(6);
      for (int r = 0; r < 6; ++r) {
        sched::RankPlan p = a->build(logical, pos[size_t(r)]);
        sched::relabel(&p, order);
        real.ranks[size_t(r)] = p;
      }
      const Status st = sched::verify_both(real);
      EXPECT_TRUE(st.ok()) << sched::coll_name(coll) << " " << a->name << ": " << st.message();
    }
  EXPECT_TRUE(sched::relabelable(Coll::AllReduce));
  EXPECT_FALSE(sched::relabelable(Coll::AllGather));
}

}  // namespace
}  // namespace weft::sim
