// The calibration fit: times generated from known constants with each algorithm's
// own formula come back as those constants; segments, the generic line, the
// nonnegativity boundary and bad samples.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "tune/fit.h"
#include "tune/table.h"

namespace weft::tune {
namespace {

// Exact times of `algo` at `n` ranks for sizes 8 B..64 MiB (x4) under cost c.
std::vector<Sample> synthetic(const char* algo, int n, const algo::LinkCost& c, uint64_t from = 8,
                              uint64_t to = 64 << 20) {
  const algo::Algorithm* a = algo::find_algorithm(sched::Coll::AllReduce, algo);
  EXPECT_NE(a, nullptr) << algo;
  std::vector<Sample> out;
  for (uint64_t b = from; b <= to; b *= 4) {
    sched::BuildArgs args{sched::Coll::AllReduce, n, b / 4, 0, (1 << 20) / 4};
    args.local_size = n;
    out.push_back({algo, n, b, a->cost(args, 4, c)});
  }
  return out;
}

const FittedEntry* find(const std::vector<FittedEntry>& f, const std::string& algo, int n, uint64_t from) {
  for (const FittedEntry& e : f)
    if (!e.generic && e.entry.algo == algo && e.entry.nranks == n && e.entry.from_bytes == from) return &e;
  return nullptr;
}

TEST(Fit, RecoversTheConstantsThatMadeTheTimes) {
  const algo::LinkCost truth{3.0e-6, 2.0e-10, 1.0e-10};
  std::vector<Sample> s = synthetic("ring", 4, truth);
  for (const Sample& x : synthetic("butterfly", 2, {5.0e-7, 8.0e-11, 1.0e-10})) s.push_back(x);
  FitOptions opt;  // gamma 1e-10, no segments
  std::vector<FittedEntry> f;
  ASSERT_TRUE(fit_samples(s, opt, &f).ok());
  ASSERT_EQ(f.size(), 2u);
  const FittedEntry* ring = find(f, "ring", 4, 0);
  ASSERT_NE(ring, nullptr);
  EXPECT_NEAR(ring->entry.cost.alpha_s / truth.alpha_s, 1.0, 1e-6);
  EXPECT_NEAR(ring->entry.cost.beta_s_per_byte / truth.beta_s_per_byte, 1.0, 1e-6);
  EXPECT_EQ(ring->entry.cost.gamma_s_per_byte, 1.0e-10);
  EXPECT_LT(ring->worst_error, 1e-6);
  EXPECT_EQ(ring->points, 12);  // 8 B, 32 B, ..., 32 MiB
  const FittedEntry* bf = find(f, "butterfly", 2, 0);
  ASSERT_NE(bf, nullptr);
  EXPECT_NEAR(bf->entry.cost.alpha_s / 5.0e-7, 1.0, 1e-6);
  EXPECT_NEAR(bf->entry.cost.beta_s_per_byte / 8.0e-11, 1.0, 1e-6);
}

TEST(Fit, SegmentsFollowTheSplitsAndSparseOnesShareANeighboursFit) {
  // Different constants below and above 64 KiB: one line each, both exact.
  std::vector<Sample> s = synthetic("direct", 4, {2.0e-6, 1.0e-10, 1.0e-10}, 8, 32 << 10);
  for (const Sample& x : synthetic("direct", 4, {1.0e-5, 3.0e-10, 1.0e-10}, 128 << 10, 64 << 20)) s.push_back(x);
  FitOptions opt;
  // [0, 16) holds one point (8 B) and [64 MiB, ...) none (the sizes stop at 32 MiB):
  // they get lines with the fits of their neighbours above and below.
  opt.splits = {16, 64 << 10, 64 << 20};
  std::vector<FittedEntry> f;
  ASSERT_TRUE(fit_samples(s, opt, &f).ok());
  ASSERT_EQ(f.size(), 4u);
  const FittedEntry* lo = find(f, "direct", 4, 0);
  const FittedEntry* hi = find(f, "direct", 4, 64 << 10);
  ASSERT_NE(lo, nullptr);
  ASSERT_NE(hi, nullptr);
  EXPECT_NEAR(lo->entry.cost.alpha_s / 2.0e-6, 1.0, 1e-6);
  EXPECT_NEAR(hi->entry.cost.beta_s_per_byte / 3.0e-10, 1.0, 1e-6);
  const FittedEntry* top = find(f, "direct", 4, 64 << 20);
  ASSERT_NE(top, nullptr);
  EXPECT_EQ(top->entry.cost.beta_s_per_byte, hi->entry.cost.beta_s_per_byte);
  EXPECT_EQ(top->points, hi->points);
  const FittedEntry* mid = find(f, "direct", 4, 16);
  ASSERT_NE(mid, nullptr);
  EXPECT_EQ(lo->entry.cost.alpha_s, mid->entry.cost.alpha_s);
  EXPECT_EQ(lo->points, 7);  // 8 B .. 32 KiB, the lone 8 B point included
}

TEST(Fit, NegativeSolutionFallsBackToTheBetterBoundary) {
  // Times that fall with size would need beta < 0; the fit keeps beta = 0 and a
  // positive alpha, and reports how badly that line fits.
  std::vector<Sample> s{{"ring", 2, 1024, 4.0e-6}, {"ring", 2, 1 << 20, 3.0e-6}, {"ring", 2, 4 << 20, 2.0e-6}};
  FitOptions opt;
  opt.gamma = 0;
  std::vector<FittedEntry> f;
  ASSERT_TRUE(fit_samples(s, opt, &f).ok());
  ASSERT_EQ(f.size(), 1u);
  EXPECT_GE(f[0].entry.cost.alpha_s, 0);
  EXPECT_GE(f[0].entry.cost.beta_s_per_byte, 0);
  EXPECT_GT(f[0].worst_error, 0.1);
}

TEST(Fit, GenericFromWritesAnyRankLinesAndTheClassLine) {
  const algo::LinkCost c{2.0e-6, 1.5e-10, 1.0e-10};
  std::vector<Sample> s = synthetic("ring", 4, c);
  for (const Sample& x : synthetic("tree", 4, c)) s.push_back(x);
  FitOptions opt;
  opt.generic_from = 4;
  std::vector<FittedEntry> f;
  ASSERT_TRUE(fit_samples(s, opt, &f).ok());
  ASSERT_EQ(f.size(), 5u);  // generic + (ring, tree) x (4, 0)
  EXPECT_TRUE(f[0].generic);
  EXPECT_EQ(f[0].points, 24);
  // Both algorithms were made from the same constants, so the joint fit finds them.
  EXPECT_NEAR(f[0].entry.cost.alpha_s / c.alpha_s, 1.0, 1e-6);
  EXPECT_NE(find(f, "tree", 0, 0), nullptr);
  // What it prints loads back as a tuning file with the same constants.
  Table t;
  ASSERT_TRUE(parse_tuning_text(format_fitted(f), "fit", &t).ok());
  EXPECT_NEAR(t.base.shm.beta_s_per_byte / c.beta_s_per_byte, 1.0, 1e-3);
  algo::LinkCost ring = t.lookup(LinkClass::Shm, sched::Coll::AllReduce, "ring", 8, 1 << 20);
  EXPECT_NEAR(ring.alpha_s / c.alpha_s, 1.0, 1e-3);
}

TEST(Fit, BadSamplesAreErrorsNamingTheSample) {
  std::vector<FittedEntry> f;
  FitOptions opt;
  Status st = fit_samples({{"rnig", 2, 1024, 1e-6}}, opt, &f);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'rnig'"), std::string::npos) << st.message();
  st = fit_samples({{"ring", 2, 1022, 1e-6}}, opt, &f);  // not a whole number of floats
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("1022"), std::string::npos) << st.message();
  st = fit_samples({{"ring", 2, 1024, 0}}, opt, &f);
  EXPECT_FALSE(st.ok());
}

}  // namespace
}  // namespace weft::tune
