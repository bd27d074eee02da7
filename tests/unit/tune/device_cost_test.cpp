// cuda_p2p's one-shot and two-shot all-reduce costs (tune/device_cost.h) against
// values worked out by hand from stated constants, and the tuning file's GPU
// link classes.
#include <gtest/gtest.h>

#include "tune/device_cost.h"
#include "tune/table.h"

namespace weft::tune {
namespace {

// alpha 10 us, beta 4 ps/B, gamma 1 ps/B.
const algo::LinkCost kNvl{10e-6, 4e-12, 1e-12};

TEST(DeviceCost, TermsByHand) {
  // 8 ranks on NVLink, 1 MiB (1,048,576 B) in one round:
  //   one-shot: latency 10 us; bandwidth 7 x 1,048,576 x 4 ps = 29.360128 us;
  //             reduction 7 x 1,048,576 x 1 ps = 7.340032 us
  //   two-shot: latency 20 us; bandwidth 2 x 7/8 x 1,048,576 x 4 ps = 7.340032 us;
  //             reduction 7/8 x 1,048,576 x 1 ps = 0.917504 us
  const DeviceTerms one = p2p_allreduce_cost(true, 8, 1 << 20, 32 << 20, LinkClass::Nvl, kNvl);
  EXPECT_NEAR(one.latency, 10e-6, 1e-15);
  EXPECT_NEAR(one.bandwidth, 29.360128e-6, 1e-15);
  EXPECT_NEAR(one.reduction, 7.340032e-6, 1e-15);
  const DeviceTerms two = p2p_allreduce_cost(false, 8, 1 << 20, 32 << 20, LinkClass::Nvl, kNvl);
  EXPECT_NEAR(two.latency, 20e-6, 1e-15);
  EXPECT_NEAR(two.bandwidth, 7.340032e-6, 1e-15);
  EXPECT_NEAR(two.reduction, 0.917504e-6, 1e-15);
  EXPECT_NEAR(two.total(), 28.257536e-6, 1e-15);
  // 80 MiB through 32 MiB buffers: 3 rounds, 3 and 6 barriers.
  EXPECT_NEAR(p2p_allreduce_cost(true, 8, 80 << 20, 32 << 20, LinkClass::Nvl, kNvl).latency, 30e-6, 1e-15);
  EXPECT_NEAR(p2p_allreduce_cost(false, 8, 80 << 20, 32 << 20, LinkClass::Nvl, kNvl).latency, 60e-6, 1e-15);
}

TEST(DeviceCost, WindowsHaveOneRoundAndALastBarrier) {
  // 80 MiB on symmetric windows: one round whatever the buffers' size, and a
  // last barrier each: 2 and 3 barriers; the bytes as through the buffers:
  // one-shot 7 x 83,886,080 x 4 ps = 2,348.81024 us.
  const DeviceTerms one = p2p_allreduce_cost(true, 8, 80 << 20, 32 << 20, LinkClass::Nvl, kNvl, true);
  const DeviceTerms two = p2p_allreduce_cost(false, 8, 80 << 20, 32 << 20, LinkClass::Nvl, kNvl, true);
  EXPECT_NEAR(one.latency, 20e-6, 1e-15);
  EXPECT_NEAR(two.latency, 30e-6, 1e-15);
  EXPECT_NEAR(one.bandwidth, 2348.81024e-6, 1e-12);
}

TEST(DeviceCost, OtherCollectivesByHand) {
  // 4 ranks on NVLink, N = 1 MiB, 32 MiB buffers (alpha 10 us, beta 4 ps/B, gamma 1 ps/B):
  //   all-gather: 1 round; 3 x 1,048,576 x 4 ps = 12.582912 us
  //   reduce-scatter: 4 MiB through the buffers, 1 round; 12.582912 us + 3 x 1,048,576 x 1 ps = 3.145728 us
  //   all-to-all: as all-gather's bytes; broadcast: 1,048,576 x 4 ps = 4.194304 us;
  //   reduce: as reduce-scatter's terms.
  using sched::Coll;
  const uint64_t N = 1 << 20, B = 32 << 20;
  const DeviceTerms ag = p2p_collective_cost(Coll::AllGather, 4, N, B, LinkClass::Nvl, kNvl, false);
  EXPECT_NEAR(ag.latency, 10e-6, 1e-15);
  EXPECT_NEAR(ag.bandwidth, 12.582912e-6, 1e-15);
  EXPECT_EQ(ag.reduction, 0);
  const DeviceTerms rs = p2p_collective_cost(Coll::ReduceScatter, 4, N, B, LinkClass::Nvl, kNvl, false);
  EXPECT_NEAR(rs.bandwidth, 12.582912e-6, 1e-15);
  EXPECT_NEAR(rs.reduction, 3.145728e-6, 1e-15);
  EXPECT_NEAR(p2p_collective_cost(Coll::AllToAll, 4, N, B, LinkClass::Nvl, kNvl, false).total(), 22.582912e-6, 1e-15);
  EXPECT_NEAR(p2p_collective_cost(Coll::Broadcast, 4, N, B, LinkClass::Nvl, kNvl, false).total(), 14.194304e-6, 1e-15);
  EXPECT_NEAR(p2p_collective_cost(Coll::Reduce, 4, N, B, LinkClass::Nvl, kNvl, false).total(), 25.72864e-6, 1e-15);
  // 10 MiB a rank: reduce-scatter and all-to-all stage 40 MiB (2 rounds), the
  // others 10 MiB (1); on windows 2 barriers whatever the size.
  EXPECT_NEAR(p2p_collective_cost(Coll::ReduceScatter, 4, 10 * N, B, LinkClass::Nvl, kNvl, false).latency, 20e-6, 1e-15);
  EXPECT_NEAR(p2p_collective_cost(Coll::AllToAll, 4, 10 * N, B, LinkClass::Nvl, kNvl, false).latency, 20e-6, 1e-15);
  EXPECT_NEAR(p2p_collective_cost(Coll::AllGather, 4, 10 * N, B, LinkClass::Nvl, kNvl, false).latency, 10e-6, 1e-15);
  EXPECT_NEAR(p2p_collective_cost(Coll::AllGather, 4, 100 * N, B, LinkClass::Nvl, kNvl, true).latency, 20e-6, 1e-15);
  // Ranks sharing one GPU: the readers at once, 4 (all-gather), 3 (broadcast), 1 (reduce's root).
  EXPECT_NEAR(p2p_collective_cost(Coll::AllGather, 4, N, B, LinkClass::Gpu, kNvl, false).bandwidth, 50.331648e-6, 1e-15);
  EXPECT_NEAR(p2p_collective_cost(Coll::Broadcast, 4, N, B, LinkClass::Gpu, kNvl, false).bandwidth, 12.582912e-6, 1e-15);
  EXPECT_NEAR(p2p_collective_cost(Coll::Reduce, 4, N, B, LinkClass::Gpu, kNvl, false).bandwidth, 12.582912e-6, 1e-15);
}

TEST(DeviceCost, LevelsWithinHostsByHand) {
  // 2 hosts x 4 ranks on NVLink (alpha 10 us, beta 4 ps/B, gamma 1 ps/B), 32 MiB buffers.
  // All-reduce of 8 MiB: reduce-scatter of 2 MiB a rank (8 MiB staged, 1 round),
  // then all-gather of 2 MiB: latency 2 x 10 us; bandwidth 2 x 3 x 2,097,152 x 4 ps
  // = 50.331648 us; reduction 3 x 2,097,152 x 1 ps = 6.291456 us.
  using sched::Coll;
  const uint64_t N = 1 << 20, B = 32 << 20;
  const DeviceTerms ar = levels_local_cost(Coll::AllReduce, 4, 2, 8 * N, B, LinkClass::Nvl, kNvl);
  EXPECT_NEAR(ar.latency, 20e-6, 1e-15);
  EXPECT_NEAR(ar.bandwidth, 50.331648e-6, 1e-15);
  EXPECT_NEAR(ar.reduction, 6.291456e-6, 1e-15);
  // 1 MiB a rank: all-gather, reduce-scatter and all-to-all move each host's 2
  // blocks: 3 x 2,097,152 x 4 ps = 25.165824 us in one round; reduce-scatter
  // reduces them too (6.291456 us); broadcast and reduce as on one host.
  const DeviceTerms ag = levels_local_cost(Coll::AllGather, 4, 2, N, B, LinkClass::Nvl, kNvl);
  EXPECT_NEAR(ag.latency, 10e-6, 1e-15);
  EXPECT_NEAR(ag.bandwidth, 25.165824e-6, 1e-15);
  EXPECT_EQ(ag.reduction, 0);
  const DeviceTerms rs = levels_local_cost(Coll::ReduceScatter, 4, 2, N, B, LinkClass::Nvl, kNvl);
  EXPECT_NEAR(rs.total(), 41.45728e-6, 1e-15);
  EXPECT_NEAR(levels_local_cost(Coll::AllToAll, 4, 2, N, B, LinkClass::Nvl, kNvl).total(), 35.165824e-6, 1e-15);
  EXPECT_NEAR(levels_local_cost(Coll::Broadcast, 4, 2, N, B, LinkClass::Nvl, kNvl).total(), 14.194304e-6, 1e-15);
  EXPECT_NEAR(levels_local_cost(Coll::Reduce, 4, 2, N, B, LinkClass::Nvl, kNvl).total(), 25.72864e-6, 1e-15);
  // What crosses hosts: a slice of the all-reduce, L blocks of each all-to-all block.
  EXPECT_EQ(levels_cross_count(Coll::AllReduce, 4, 1000), 250u);
  EXPECT_EQ(levels_cross_count(Coll::AllToAll, 4, 1000), 4000u);
  for (Coll c : {Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter})
    EXPECT_EQ(levels_cross_count(c, 4, 1000), 1000u);
  // Copies of 1 MiB each way through pinned memory (alpha 5 us, beta 0.1 ns/B):
  // 2 x 5 us + 2,097,152 x 0.1 ns = 219.7152 us.
  EXPECT_NEAR(staging_copies_cost(2 * N, algo::LinkCost{5e-6, 0.1e-9, 0}), 219.7152e-6, 1e-15);
}

TEST(DeviceCost, ThePlansAddTheirPartsAndTheExplanationNamesThePick) {
  DevicePlanCost pc{.local = {20e-6, 50e-6, 6e-6}, .cross_copies = 100e-6, .cross_host = 300e-6, .copies = 200e-6,
                    .host = 250e-6, .cross_algo = "ring", .host_algo = "hierarchical"};
  EXPECT_NEAR(pc.levels(), 476e-6, 1e-15);
  EXPECT_NEAR(pc.staged(), 450e-6, 1e-15);
  const std::string text = explain_device_plan(sched::Coll::AllReduce, 8 << 20, 4, 2, LinkClass::Nvl, pc, false, -1);
  EXPECT_NE(text.find("allreduce 8388608 B (size class 24) on device memory, 2 hosts x 4 ranks:"), std::string::npos)
      << text;
  EXPECT_NE(text.find("levels        476.000 us = within hosts over cuda_p2p (link class nvl) 76.000 + copies 100.000 "
                      "+ across hosts (ring, 2 ranks) 300.000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("staged        450.000 us = copies 200.000 + host call (hierarchical, 8 ranks) 250.000  <- pick"),
            std::string::npos)
      << text;
  const std::string forced = explain_device_plan(sched::Coll::AllReduce, 8 << 20, 4, 2, LinkClass::Nvl, pc, true, 1);
  EXPECT_NE(forced.find("WEFT_DEVICE_LEVELS=1 decides"), std::string::npos) << forced;
  EXPECT_NE(forced.find("300.000  <- pick"), std::string::npos) << forced;
}

TEST(DeviceCost, OverlappedRoundsTakeTheSlowerSideOnceARoundAndBothOnce) {
  // Two resources in turn over R rounds: the first round's stream part, then the
  // engine's and the stream's side by side, the last round's engine part alone.
  // s = 3, e = 5, R = 4: 3 + 5 + 3 x 5 = 23; s = 7, e = 2, R = 2: 7 + 2 + 7 = 16.
  EXPECT_DOUBLE_EQ(level_rounds_cost(3, 5, 4), 23);
  EXPECT_DOUBLE_EQ(level_rounds_cost(7, 2, 2), 16);
  EXPECT_DOUBLE_EQ(level_rounds_cost(7, 2, 1), 9);  // one round: one after the other

  DevicePlanCost pc{.local = {20e-6, 400e-6, 80e-6}, .cross_copies = 100e-6, .cross_host = 900e-6, .copies = 900e-6,
                    .host = 1500e-6, .cross_algo = "ring", .host_algo = "ring"};
  // Four rounds, each: within hosts 100 us + copies 30 us (the stream, 130) and
  // 240 us across: 130 + 240 + 3 x 240 = 1090 us against 1500 us one after the other.
  pc.rounds = 4;
  pc.round_local = 100e-6;
  pc.round_copies = 30e-6;
  pc.round_cross = 240e-6;
  pc.in_rounds = true;
  EXPECT_NEAR(pc.levels(), 1500e-6, 1e-15);
  EXPECT_NEAR(pc.overlapped(), 1090e-6, 1e-15);
  EXPECT_NEAR(pc.levels_plan(), 1090e-6, 1e-15);
  std::string text = explain_device_plan(sched::Coll::AllReduce, 64 << 20, 4, 2, LinkClass::Nvl, pc, true, -1);
  EXPECT_NE(text.find("rounds       1090.000 us = 4 overlapped rounds of levels, each within hosts 100.000 + copies "
                      "30.000 (the stream) and across hosts 240.000 (the engine): s + e + (R-1) max(s, e)  <- pick\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("300.000  <- pick"), std::string::npos) << text;  // levels one after the other is not
  // Not taken: the levels line keeps the pick, the rounds line says why not.
  pc.in_rounds = false;
  EXPECT_NEAR(pc.levels_plan(), 1500e-6, 1e-15);
  text = explain_device_plan(sched::Coll::AllReduce, 64 << 20, 4, 2, LinkClass::Nvl, pc, true, -1);
  EXPECT_NE(text.find("900.000  <- pick"), std::string::npos) << text;
  EXPECT_NE(text.find("(not taken: 10% faster than one round needed)"), std::string::npos) << text;
}

TEST(DeviceCost, RanksSharingOneGpuShareItsMemory) {
  // The same constants as class gpu at 4 ranks: beta and gamma count 4 times.
  // 1 MiB one-shot: 10 + 3 x 4 x 4.194304 + 3 x 4 x 1.048576 us = 10 + 50.331648 + 12.582912.
  const DeviceTerms t = p2p_allreduce_cost(true, 4, 1 << 20, 32 << 20, LinkClass::Gpu, kNvl);
  EXPECT_NEAR(t.bandwidth, 50.331648e-6, 1e-15);
  EXPECT_NEAR(t.reduction, 12.582912e-6, 1e-15);
  EXPECT_NEAR(t.total(), 72.91456e-6, 1e-15);
}

TEST(DeviceCost, CrossoverWhereTheSecondBarrierPays) {
  // 8 ranks on NVLink: one-shot - two-shot = -alpha + N (7 x 4 x 3/4 + 7 x 1 x 7/8) ps
  // = -10 us + 27.125 ps x N: two-shot wins above 368,664 B.
  auto oneshot_wins = [](uint64_t bytes) {
    return p2p_allreduce_cost(true, 8, bytes, 32 << 20, LinkClass::Nvl, kNvl).total() <=
           p2p_allreduce_cost(false, 8, bytes, 32 << 20, LinkClass::Nvl, kNvl).total();
  };
  EXPECT_TRUE(oneshot_wins(368000));
  EXPECT_FALSE(oneshot_wins(369500));
  // Two ranks move as many bytes either way; two-shot reduces half:
  // -10 us + N x 1 ps x 1/2 > 0 above 20 MB.
  auto oneshot_wins_2 = [](uint64_t bytes) {
    return p2p_allreduce_cost(true, 2, bytes, 1ull << 30, LinkClass::Nvl, kNvl).total() <=
           p2p_allreduce_cost(false, 2, bytes, 1ull << 30, LinkClass::Nvl, kNvl).total();
  };
  EXPECT_TRUE(oneshot_wins_2(19'900'000));
  EXPECT_FALSE(oneshot_wins_2(20'100'000));
  // One rank: nothing to move.
  EXPECT_EQ(p2p_allreduce_cost(true, 1, 1 << 20, 32 << 20, LinkClass::Nvl, kNvl).total(), 0);
}

TEST(DeviceCost, TuningFileSetsTheGpuClasses) {
  Table t = default_table();
  ASSERT_TRUE(parse_tuning_text("nvl * * 0 0 1e-05 4e-12 1e-12\np2p allreduce * 8 0 2e-05 5e-11 1e-12\n", "test", &t)
                  .ok());
  EXPECT_EQ(t.lookup(LinkClass::Nvl, sched::Coll::AllReduce, "*", 8, 1024).beta_s_per_byte, 4e-12);
  EXPECT_EQ(t.lookup(LinkClass::Pcie, sched::Coll::AllReduce, "*", 8, 1024).alpha_s, 2e-5);
  EXPECT_EQ(t.lookup(LinkClass::Pcie, sched::Coll::AllReduce, "*", 4, 1024).alpha_s, t.base.pcie.alpha_s);
  Table u;
  ASSERT_TRUE(parse_tuning_text(format_table(t), "roundtrip", &u).ok());
  EXPECT_EQ(format_table(u), format_table(t));
  EXPECT_NE(format_table(t).find("gpu * * 0 0"), std::string::npos);
  const Status bad = parse_tuning_text("tpu * * 0 0 1 1 1\n", "test", &u);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("known: shm, numa, net, gpu, nvl, p2p, stg"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace weft::tune
