// Online tuning: which candidates a size class's trial times, in what order of
// calls, how its times become one per candidate, the winner, and how the tuner
// hands calls to a trial (tune/online.h, Tuner::pick).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/registry.h"
#include "tune/online.h"
#include "tune/tuner.h"

namespace weft::tune {
namespace {

using sched::BuildArgs;
using sched::Coll;

const algo::Algorithm* A(const char* name) {
  const algo::Algorithm* a = algo::find_algorithm(Coll::AllReduce, name);
  EXPECT_NE(a, nullptr) << name;
  return a;
}

// `rounds` full rounds and no final ones unless asked.
OnlineOptions opts(int rounds = 3, int max_cands = 8, double range = 3.0, double turn_s = 1e-3,
                   double keep = 1.25, int final_rounds = 0) {
  OnlineOptions o;
  o.rounds = rounds;
  o.final_rounds = final_rounds;
  o.keep = keep;
  o.max_candidates = max_cands;
  o.range = range;
  o.turn_seconds = turn_s;
  return o;
}

// One whole turn: the untimed first call (a huge time that must not count), then
// turn_calls() calls of `seconds` each. Returns what the last record() said.
bool turn(Trial& t, double seconds) {
  EXPECT_FALSE(t.record(1e9));
  bool end = false;
  for (int i = 0; i < t.turn_calls(); ++i) end = t.record(seconds);
  return end;
}

TEST(Trial, KeepsTheModelsBestWithinRangeAndCap) {
  // Predicted 10, 20, 29, 31 us: range 3x keeps the first three.
  Trial t({{A("ring"), 10e-6}, {A("tree"), 20e-6}, {A("butterfly"), 29e-6}, {A("naive"), 31e-6}}, opts());
  EXPECT_EQ(t.ncands(), 3);
  Trial capped({{A("ring"), 10e-6}, {A("tree"), 11e-6}, {A("butterfly"), 12e-6}}, opts(3, 2));
  EXPECT_EQ(capped.ncands(), 2);
  EXPECT_FALSE(t.settled());
}

TEST(Trial, OneCandidateIsSettledAtOnce) {
  Trial t({{A("ring"), 10e-6}, {A("tree"), 100e-6}}, opts());
  ASSERT_EQ(t.ncands(), 1);
  EXPECT_TRUE(t.settled());
  EXPECT_EQ(t.winner(), A("ring"));
}

TEST(Trial, TurnLengthFollowsThePrediction) {
  EXPECT_EQ(Trial({{A("ring"), 10e-6}, {A("tree"), 11e-6}}, opts()).turn_calls(), 100);  // 1 ms / 10 us
  EXPECT_EQ(Trial({{A("ring"), 1e-7}, {A("tree"), 1e-7}}, opts()).turn_calls(), 1024);   // capped
  EXPECT_EQ(Trial({{A("ring"), 1.0}, {A("tree"), 1.1}}, opts()).turn_calls(), 1);        // at least one
}

// Behind token buckets (bench/topology's tbf: 128 KiB at 239 MB/s, two bursts'
// worth 1.1 ms) the first calls of a turn spend the saved-up tokens untimed.
TEST(Trial, WarmupCallsAreNotTimed) {
  OnlineOptions o = opts(1);
  o.warmup_seconds = 1.1e-3;
  Trial t({{A("ring"), 500e-6}, {A("tree"), 600e-6}}, o);
  ASSERT_EQ(t.warmup_calls(), 3);  // ceil(1.1 ms / 500 us)
  ASSERT_EQ(t.turn_calls(), 2);
  for (double s : {1e9, 1e9, 1e9, 1.0, 3.0, 1e9, 1e9, 1e9, 10.0}) EXPECT_FALSE(t.record(s));
  EXPECT_TRUE(t.record(30.0));
  EXPECT_DOUBLE_EQ(t.local_times()[0], 2.0);
  EXPECT_DOUBLE_EQ(t.local_times()[1], 20.0);
  EXPECT_EQ(Trial({{A("ring"), 500e-6}}, opts()).warmup_calls(), 1);  // without: the one untimed call
}

TEST(Trial, FinalRoundsGoRoundRobinOverTheCandidatesStillIn) {
  // 3 candidates, turns of 1 untimed + 100 timed calls, 1 full round and 1 final one.
  Trial t({{A("ring"), 10e-6}, {A("tree"), 11e-6}, {A("butterfly"), 12e-6}}, opts(1, 8, 3.0, 1e-3, 1.25, 1));
  ASSERT_EQ(t.turn_calls(), 100);
  const algo::Algorithm* first[] = {A("ring"), A("tree"), A("butterfly")};
  for (int call = 0; call < 303; ++call) {
    ASSERT_EQ(t.current(), first[call / 101]) << "call " << call;
    EXPECT_EQ(t.record(1e-6), call == 302) << "call " << call;
  }
  // butterfly is 30% slower than ring: out (keep 1.25); tree at 20% stays.
  EXPECT_EQ(t.agreed({1.0, 1.2, 1.3}), nullptr);
  EXPECT_FALSE(t.settled());
  const algo::Algorithm* second[] = {A("ring"), A("tree")};
  for (int call = 0; call < 202; ++call) {
    ASSERT_EQ(t.current(), second[call / 101]) << "call " << call;
    EXPECT_EQ(t.record(1e-6), call == 201) << "call " << call;
  }
  // The last round: the fastest of those still in.
  EXPECT_EQ(t.agreed({3.0, 2.0, 0.5}), A("tree"));
  EXPECT_TRUE(t.settled());
}

TEST(Trial, FullRoundsKeepEveryCandidate) {
  // 2 full rounds, 2 final: a candidate 3x slower in round 1 is still timed in round 2.
  Trial t({{A("ring"), 1.0}, {A("tree"), 1.0}, {A("butterfly"), 1.0}}, opts(2, 8, 3.0, 1e-3, 1.25, 2));
  ASSERT_EQ(t.turn_calls(), 1);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(turn(t, 1.0), k == 2);
  EXPECT_EQ(t.agreed({3.0, 1.0, 3.0}), nullptr);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(turn(t, 1.0), k == 2) << "all three again";
  // After the last full round only tree is within 25%: settled early.
  EXPECT_EQ(t.agreed({2.0, 1.0, 3.0}), A("tree"));
  EXPECT_TRUE(t.settled());
}

TEST(Trial, EachCandidatesTimeIsItsMedianTurn) {
  Trial t({{A("ring"), 1.0}, {A("tree"), 1.0}}, opts(3));  // one timed call per turn, 3 full rounds
  ASSERT_EQ(t.turn_calls(), 1);
  // ring's turns: 5, 1, 3 -> 3; tree's: 2, 9, 4 -> 4.
  const double turns[3][2] = {{5.0, 2.0}, {1.0, 9.0}, {3.0, 4.0}};
  for (const auto& round : turns) {
    EXPECT_FALSE(turn(t, round[0]));
    EXPECT_TRUE(turn(t, round[1]));
    t.agreed(t.local_times());
  }
  const std::vector<double> local = t.local_times();
  ASSERT_EQ(local.size(), 2u);
  EXPECT_DOUBLE_EQ(local[0], 3.0);
  EXPECT_DOUBLE_EQ(local[1], 4.0);
  EXPECT_EQ(t.winner(), A("ring"));
}

TEST(Trial, TurnTimeIsPerTimedCall) {
  Trial t({{A("ring"), 500e-6}, {A("tree"), 500e-6}}, opts(1));
  ASSERT_EQ(t.turn_calls(), 2);
  for (double s : {1e9, 1.0, 3.0, 1e9, 10.0, 30.0}) t.record(s);
  EXPECT_DOUBLE_EQ(t.local_times()[0], 2.0);
  EXPECT_DOUBLE_EQ(t.local_times()[1], 20.0);
}

TEST(Trial, SettlesOnTheAgreedFastestTiesToTheModelsOrder) {
  Trial t({{A("ring"), 1.0}, {A("tree"), 1.0}, {A("butterfly"), 1.0}}, opts(1));
  for (int k = 0; k < 3; ++k) turn(t, 1.0);
  EXPECT_EQ(t.agreed({3.0, 1.0, 2.0}), A("tree"));
  EXPECT_TRUE(t.settled());
  EXPECT_EQ(t.winner(), A("tree"));
  EXPECT_NE(t.explain().find("-> tree (model: ring"), std::string::npos) << t.explain();
  Trial tie({{A("ring"), 1.0}, {A("tree"), 1.0}}, opts(1));
  for (int k = 0; k < 2; ++k) turn(tie, 1.0);
  EXPECT_EQ(tie.agreed({2.0, 2.0}), A("ring"));
}

std::unique_ptr<Tuner> make(const std::string& algo, bool online, int nranks = 4) {
  Options o;
  o.algo = algo;
  o.log_table = false;
  o.online = opts(1);
  o.online.enabled = online;
  std::unique_ptr<Tuner> t;
  Status st = Tuner::create(nranks, nranks, o, &t);
  EXPECT_TRUE(st.ok()) << st.message();
  return t;
}

// Runs the tuner's trial for one call shape to the end as a communicator would,
// every call taking `secs(algorithm)`; returns the calls it took.
int run_trial(Tuner& t, const BuildArgs& b, double (*secs)(const algo::Algorithm*)) {
  for (int calls = 1; calls < 10000; ++calls) {
    Pick p;
    EXPECT_TRUE(t.pick(b.coll, b, 4, &p).ok());
    if (p.trial == nullptr) return calls - 1;
    if (p.trial->record(secs(p.algo))) p.trial->agreed(p.trial->local_times());
  }
  ADD_FAILURE() << "the trial never ended";
  return -1;
}

const algo::Algorithm* g_fastest = nullptr;  // run_trial's time function reads it

TEST(TunerPick, MeasuresThenRunsTheMeasuredFastestForTheWholeSizeClass) {
  auto t = make("", true);
  const BuildArgs b{Coll::AllReduce, 4, 1 << 20, 0, 262144};  // 4 MiB of floats
  const algo::Algorithm* model = nullptr;
  ASSERT_TRUE(t->choose(Coll::AllReduce, b, 4, &model).ok());
  Pick p;
  ASSERT_TRUE(t->pick(Coll::AllReduce, b, 4, &p).ok());
  ASSERT_NE(p.trial, nullptr) << "online tuning measures the first calls";
  EXPECT_EQ(p.algo, model) << "the first turn is the model's pick";
  ASSERT_GE(p.trial->ncands(), 2);
  // Make the model's last-ranked candidate the fastest: a copy of the trial
  // advanced to the last turn of the first round names it.
  Trial copy = *p.trial;
  for (int k = 0; k + 1 < copy.ncands(); ++k) turn(copy, 1.0);
  g_fastest = copy.current();
  ASSERT_NE(g_fastest, model);
  const int calls = run_trial(*t, b, [](const algo::Algorithm* a) { return a == g_fastest ? 1e-6 : 5e-6; });
  EXPECT_EQ(calls, p.trial->ncands() * (1 + p.trial->turn_calls())) << "one round of turns";
  bool settled = false;
  const algo::Algorithm* q = nullptr;
  ASSERT_TRUE(t->query(Coll::AllReduce, b, 4, &q, &settled).ok());
  EXPECT_TRUE(settled);
  EXPECT_EQ(q, g_fastest);
  // Another count of the same size class runs the winner without measuring.
  const BuildArgs b2{Coll::AllReduce, 4, (1 << 20) + 12345, 0, 262144};
  Pick p2;
  ASSERT_TRUE(t->pick(Coll::AllReduce, b2, 4, &p2).ok());
  EXPECT_EQ(p2.trial, nullptr);
  EXPECT_EQ(p2.algo, g_fastest);
}

// Where the communicator's hosts share one machine's cores (network namespaces),
// turns last shared_turn_seconds (10 ms) instead of turn_seconds (1 ms): as many
// calls as the model's best candidate predicts fill it.
TEST(TunerPick, HostsSharingCoresTakeLongerTurns) {
  for (bool shared : {false, true}) {
    Options o;
    o.log_table = false;
    o.online = opts();
    o.online.shared_turn_seconds = 10e-3;
    o.layout = sim::Fabric::host_blocks(4, 2);
    if (shared) sim::set_machines({0, 0, 0, 0}, {{0}, {1}, {0}, {1}}, &o.layout);
    std::unique_ptr<Tuner> t;
    ASSERT_TRUE(Tuner::create(4, 2, o, &t).ok());
    const BuildArgs b{Coll::AllReduce, 4, 1024, 0, 262144};  // 4 KiB
    double best = 1e30;
    for (const Prediction& c : t->candidates(Coll::AllReduce, b, 4)) best = std::min(best, c.seconds);
    Pick p;
    ASSERT_TRUE(t->pick(Coll::AllReduce, b, 4, &p).ok());
    ASSERT_NE(p.trial, nullptr);
    EXPECT_EQ(p.trial->turn_calls(), static_cast<int>(std::ceil((shared ? 10e-3 : 1e-3) / best)))
        << (shared ? "shared cores" : "a core per rank") << ", best predicted " << best;
  }
}

TEST(TunerPick, QueryDoesNotStartATrial) {
  auto t = make("", true);
  const BuildArgs b{Coll::AllReduce, 4, 4096, 0, 262144};
  bool settled = true;
  const algo::Algorithm* q = nullptr;
  ASSERT_TRUE(t->query(Coll::AllReduce, b, 4, &q, &settled).ok());
  EXPECT_FALSE(settled);
  const algo::Algorithm* model = nullptr;
  ASSERT_TRUE(t->choose(Coll::AllReduce, b, 4, &model).ok());
  EXPECT_EQ(q, model);
  // Querying again and then calling: the first call is still the first turn.
  ASSERT_TRUE(t->query(Coll::AllReduce, b, 4, &q, &settled).ok());
  Pick p;
  ASSERT_TRUE(t->pick(Coll::AllReduce, b, 4, &p).ok());
  ASSERT_NE(p.trial, nullptr);
  EXPECT_EQ(p.algo, model);
}

TEST(TunerPick, OffOrForcedMeansTheModelAlone) {
  const BuildArgs b{Coll::AllReduce, 4, 4096, 0, 262144};
  for (auto [algo, online] : {std::pair<const char*, bool>{"", false}, {"allreduce:ring", true}}) {
    auto t = make(algo, online);
    const algo::Algorithm* model = nullptr;
    ASSERT_TRUE(t->choose(Coll::AllReduce, b, 4, &model).ok());
    Pick p;
    ASSERT_TRUE(t->pick(Coll::AllReduce, b, 4, &p).ok());
    EXPECT_EQ(p.trial, nullptr) << algo;
    EXPECT_EQ(p.algo, model) << algo;
    bool settled = false;
    const algo::Algorithm* q = nullptr;
    ASSERT_TRUE(t->query(Coll::AllReduce, b, 4, &q, &settled).ok());
    EXPECT_TRUE(settled) << algo;
  }
}

TEST(TunerPick, OneRankHasNothingToMeasure) {
  auto t = make("", true, 1);
  const BuildArgs b{Coll::AllReduce, 1, 4096, 0, 262144};
  Pick p;
  ASSERT_TRUE(t->pick(Coll::AllReduce, b, 4, &p).ok());
  EXPECT_EQ(p.trial, nullptr);
}

TEST(TunerPick, AForcedListIsMeasuredAmongItsMembers) {
  auto t = make("allreduce:ring,tree", true);
  const BuildArgs b{Coll::AllReduce, 4, 1 << 20, 0, 262144};
  for (int call = 0; call < 1000; ++call) {
    Pick p;
    ASSERT_TRUE(t->pick(Coll::AllReduce, b, 4, &p).ok());
    const std::string name = p.algo->name;
    EXPECT_TRUE(name == "ring" || name == "tree") << name;
    if (p.trial == nullptr) {
      EXPECT_EQ(name, "tree") << "the measured fastest";
      return;
    }
    if (p.trial->record(name == "tree" ? 1e-6 : 2e-6)) {
      p.trial->agreed(p.trial->local_times());
    }
  }
  ADD_FAILURE() << "the trial never ended";
}

}  // namespace
}  // namespace weft::tune
