// The tuner: WEFT_ALGO syntax and errors, hierarchical's candidacy, the tuning
// table and file. Which algorithm the model picks, against costs worked out by
// hand, is in hand_costs_test.cpp; the TUNE log line in log_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "algorithms/registry.h"
#include "tune/algo_spec.h"
#include "tune/table.h"
#include "tune/tuner.h"

namespace weft::tune {
namespace {

using sched::BuildArgs;
using sched::Coll;

std::unique_ptr<Tuner> make(const std::string& algo, int nranks = 4, int local = 4,
                            const std::string& file = "") {
  Options o;
  o.algo = algo;
  o.tuning_file = file;
  o.log_table = false;
  std::unique_ptr<Tuner> t;
  Status st = Tuner::create(nranks, local, o, &t);
  EXPECT_TRUE(st.ok()) << st.message();
  return t;
}

Status create_error(const std::string& algo) {
  Options o;
  o.algo = algo;
  o.log_table = false;
  std::unique_ptr<Tuner> t;
  return Tuner::create(4, 4, o, &t);
}

const char* pick(Tuner& t, Coll coll, uint64_t count, int nranks = 4, size_t esize = 4) {
  const algo::Algorithm* a = nullptr;
  BuildArgs b{coll, nranks, count, 0, 262144};
  Status st = t.choose(coll, b, esize, &a);
  EXPECT_TRUE(st.ok()) << st.message();
  return a ? a->name : "(none)";
}

TEST(AlgoSpec, EmptyAllowsEverything) {
  AlgoSpec s;
  ASSERT_TRUE(parse_algo_spec("", &s).ok());
  for (const auto& f : s.per_coll) EXPECT_FALSE(f.active);
}

TEST(AlgoSpec, PlainNameAppliesWhereItExists) {
  auto t = make("ring");
  for (Coll c : {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter})
    for (uint64_t count : {1u, 1000u, 10000000u}) EXPECT_STREQ(pick(*t, c, count), "ring");
  // All-to-all has no ring: it is chosen by cost, not refused.
  EXPECT_FALSE(t->spec().filter(Coll::AllToAll).active);
  EXPECT_STREQ(pick(*t, Coll::AllToAll, 100), "pairwise");
}

TEST(AlgoSpec, CaseAndSpacesIgnored) {
  auto t = make(" AllReduce : Tree ");
  EXPECT_STREQ(pick(*t, Coll::AllReduce, 100), "tree");
}

TEST(AlgoSpec, PerCollective) {
  auto t = make("allreduce:tree,broadcast:naive");
  EXPECT_STREQ(pick(*t, Coll::AllReduce, 1 << 20), "tree");
  EXPECT_STREQ(pick(*t, Coll::Broadcast, 1 << 20), "naive");
  EXPECT_FALSE(t->spec().filter(Coll::Reduce).active);
}

TEST(AlgoSpec, SemicolonsAndListsPerCollective) {
  auto t = make("allreduce:tree,naive;broadcast:ring");
  const CollFilter& f = t->spec().filter(Coll::AllReduce);
  EXPECT_TRUE(f.active);
  EXPECT_FALSE(f.exclude);
  EXPECT_EQ(f.names, (std::vector<std::string>{"tree", "naive"}));
  std::string p = pick(*t, Coll::AllReduce, 1000);
  EXPECT_TRUE(p == "tree" || p == "naive") << p;
  EXPECT_STREQ(pick(*t, Coll::Broadcast, 1000), "ring");
}

TEST(AlgoSpec, ExclusionList) {
  auto t = make("^ring,tree");
  BuildArgs b{Coll::AllReduce, 4, 1 << 20, 0, 262144};
  for (const Prediction& p : t->candidates(Coll::AllReduce, b, 4)) {
    EXPECT_STRNE(p.algo->name, "ring");
    EXPECT_STRNE(p.algo->name, "tree");
  }
  auto t2 = make("allreduce:^oneshot");
  BuildArgs small{Coll::AllReduce, 4, 1, 0, 262144};
  for (const Prediction& p : t2->candidates(Coll::AllReduce, small, 4)) EXPECT_STRNE(p.algo->name, "oneshot");
}

TEST(AlgoSpec, Errors) {
  struct Case {
    const char* spec;
    const char* must_contain;
  };
  const Case cases[] = {
      {"bogus", "unknown algorithm 'bogus' (available: ring, tree"},
      {"allreduce:bruck", "allreduce has no algorithm 'bruck' (available: ring, tree"},
      {"allgather:tree", "allgather has no algorithm 'tree'"},
      {"allredux:ring", "unknown collective 'allredux'"},
      {"allreduce:ring;allreduce:tree", "'allreduce' is given twice"},
      {"ring,^tree", "'^' excludes the whole list"},
      {"alltoall:^pairwise", "excludes every alltoall algorithm (available: pairwise)"},
      {"allreduce:", "empty algorithm name"},
  };
  for (const Case& c : cases) {
    Status st = create_error(c.spec);
    EXPECT_EQ(st.code(), weftInvalidArgument) << c.spec;
    EXPECT_NE(st.message().find(c.must_contain), std::string::npos) << c.spec << ": " << st.message();
    EXPECT_NE(st.message().find(std::string("WEFT_ALGO=") + c.spec), std::string::npos) << st.message();
  }
}

TEST(Tuner, UnsupportedForcedChoiceIsAnErrorNamingIt) {
  // hierarchical needs ranks per node (BuildArgs::local_size); without it, it cannot run.
  auto t = make("allreduce:hierarchical");
  const algo::Algorithm* a = nullptr;
  BuildArgs b{Coll::AllReduce, 4, 100, 0, 0};
  Status st = t->choose(Coll::AllReduce, b, 4, &a);
  EXPECT_EQ(st.code(), weftInvalidArgument);
  EXPECT_NE(st.message().find("WEFT_ALGO=allreduce:hierarchical"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("available: ring, tree"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("hierarchical)"), std::string::npos) << st.message();
  // With local_size it can.
  BuildArgs ok{Coll::AllReduce, 4, 100, 0, 0, 2};
  st = t->choose(Coll::AllReduce, ok, 4, &a);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_STREQ(a->name, "hierarchical");
}

TEST(Tuner, HierarchicalOnOneHostOnlyWhenNamed) {
  BuildArgs one_host{Coll::AllReduce, 4, 1 << 24, 0, 262144, 4};
  BuildArgs two_hosts{Coll::AllReduce, 4, 1 << 24, 0, 262144, 2};
  auto has = [](const std::vector<Prediction>& v) {
    for (const Prediction& p : v)
      if (std::string(p.algo->name) == "hierarchical") return true;
    return false;
  };
  auto t = make("", 4, 4);
  EXPECT_FALSE(has(t->candidates(Coll::AllReduce, one_host, 4)));
  EXPECT_TRUE(has(t->candidates(Coll::AllReduce, two_hosts, 4)));
  auto forced = make("allreduce:hierarchical", 4, 4);
  EXPECT_TRUE(has(forced->candidates(Coll::AllReduce, one_host, 4)));
}

TEST(Tuner, LinkClassFollowsHostSharing) {
  EXPECT_EQ(make("", 4, 4)->link_class(), LinkClass::Shm);
  EXPECT_EQ(make("", 4, 2)->link_class(), LinkClass::Net);
  EXPECT_EQ(make("", 1, 1)->link_class(), LinkClass::Shm);
}

TEST(Table, LookupPrefersTheMostSpecificEntry) {
  Table t;
  t.base.shm = {1, 1, 1};
  t.entries.clear();
  t.set({LinkClass::Shm, Coll::AllReduce, "*", 0, 0, {2, 0, 0}});
  t.set({LinkClass::Shm, Coll::AllReduce, "ring", 0, 0, {3, 0, 0}});
  t.set({LinkClass::Shm, Coll::AllReduce, "ring", 4, 0, {4, 0, 0}});
  t.set({LinkClass::Shm, Coll::AllReduce, "ring", 4, 1024, {5, 0, 0}});
  EXPECT_EQ(t.lookup(LinkClass::Shm, Coll::Broadcast, "ring", 4, 10).alpha_s, 1);
  EXPECT_EQ(t.lookup(LinkClass::Net, Coll::AllReduce, "ring", 4, 10).alpha_s, LinkClassCosts{}.net.alpha_s);
  EXPECT_EQ(t.lookup(LinkClass::Shm, Coll::AllReduce, "tree", 4, 10).alpha_s, 2);
  EXPECT_EQ(t.lookup(LinkClass::Shm, Coll::AllReduce, "ring", 2, 10).alpha_s, 3);
  EXPECT_EQ(t.lookup(LinkClass::Shm, Coll::AllReduce, "ring", 4, 1023).alpha_s, 4);
  EXPECT_EQ(t.lookup(LinkClass::Shm, Coll::AllReduce, "ring", 4, 1024).alpha_s, 5);
  t.set({LinkClass::Shm, Coll::AllReduce, "ring", 4, 1024, {6, 0, 0}});  // replaces
  EXPECT_EQ(t.entries.size(), 4u);
  EXPECT_EQ(t.lookup(LinkClass::Shm, Coll::AllReduce, "ring", 4, 4096).alpha_s, 6);
}

TEST(Table, DefaultsCoverEveryAllReduceAlgorithmOnSharedMemory) {
  Table t = default_table();  // aborts if the built-in text does not parse
  for (const algo::Algorithm* a : algo::algorithms_for(Coll::AllReduce)) {
    if (a->two_level) continue;  // needs ranks per node; not measured on one host
    for (int n : {0, 2, 4}) {
      bool found = false;
      for (const Entry& e : t.entries)
        found = found || (e.cls == LinkClass::Shm && e.coll == Coll::AllReduce && e.algo == a->name && e.nranks == n);
      EXPECT_TRUE(found) << a->name << " n=" << n;
    }
  }
}

TEST(Table, FormatThenParseRoundTrips) {
  Table t = default_table();
  t.set({LinkClass::Net, Coll::Broadcast, "tree", 8, 65536, {1.5e-5, 2.5e-10, 0}});
  t.net_burst = {131072, 5e-10};
  t.cores = {0.8, 1.5e-9};
  t.net_wire_s = 0.0005;
  Table u;
  u.entries.clear();
  ASSERT_TRUE(parse_tuning_text(format_table(t), "roundtrip", &u).ok());
  ASSERT_EQ(u.entries.size(), t.entries.size());
  EXPECT_EQ(format_table(u), format_table(t));
  EXPECT_EQ(u.net_burst.bytes, 131072);
  EXPECT_EQ(u.net_burst.line_s_per_byte, 5e-10);
  EXPECT_EQ(u.cores.cpu_share, 0.8);
  EXPECT_EQ(u.cores.net_rx_s_per_byte, 1.5e-9);
  EXPECT_EQ(u.net_wire_s, 0.0005);
}

TEST(Table, ParseErrorsNameFileAndLine) {
  Table t;
  struct Case {
    const char* text;
    const char* must_contain;
  };
  const Case cases[] = {
      {"# ok\nshm allreduce ring 0 0 1e-6\n", "f.txt:2: expected"},
      {"dsl allreduce ring 0 0 1 1 1\n", "f.txt:1: unknown link class 'dsl'"},
      {"shm allgather tree 0 0 1 1 1\n", "f.txt:1: no algorithm 'tree' for allgather"},
      {"shm frobnicate * 0 0 1 1 1\n", "unknown collective 'frobnicate'"},
      {"shm allreduce ring 0 0 -1 1 1\n", "negative"},
      {"shm * ring 0 0 1 1 1\n", "must be '*'"},
      {"shm allreduce ring 0 0 1 1 1 7\n", "expected"},
      {"burst shm 131072 5e-10\n", "f.txt:1: expected 'burst net"},
      {"burst net 131072\n", "expected 'burst net"},
      {"burst net 131072 0\n", "expected 'burst net"},
      {"cores 0.45\n", "f.txt:1: expected 'cores"},
      {"cores 1.5 8e-10\n", "expected 'cores"},
      {"cores 0.45 1e-3\n", "expected 'cores"},
      {"cores 0.45 8e-10 1\n", "expected 'cores"},
      {"wire shm 0.001\n", "f.txt:1: expected 'wire net"},
      {"wire net\n", "expected 'wire net"},
      {"wire net -1e-3\n", "expected 'wire net"},
      {"wire net 1e-3 2\n", "expected 'wire net"},
  };
  for (const Case& c : cases) {
    Status st = parse_tuning_text(c.text, "f.txt", &t);
    EXPECT_EQ(st.code(), weftInvalidArgument) << c.text;
    EXPECT_NE(st.message().find(c.must_contain), std::string::npos) << st.message();
  }
}

TEST(Tuner, TuningFileOverridesDefaults) {
  char path[] = "/tmp/weft-tune-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    // Make tree free and everything else expensive on the network (the defaults
    // have no per-algorithm net entries): the tuner must follow the file.
    std::ofstream f(path);
    f << "# test\nnet * * 0 0 1 1 1\nnet allreduce tree 0 0 0 0 0\nshm allreduce ring 2 0 3 0 0\n";
  }
  auto t = make("", 4, 2, path);
  EXPECT_EQ(t->table().base.net.alpha_s, 1);
  for (uint64_t count : {1u, 1000u, 1000000u}) EXPECT_STREQ(pick(*t, Coll::AllReduce, count), "tree");
  // A same-key line replaces the default entry; the others stay.
  EXPECT_EQ(t->table().lookup(LinkClass::Shm, Coll::AllReduce, "ring", 2, 8).alpha_s, 3);
  EXPECT_EQ(t->table().entries.size(), default_table().entries.size() + 1);  // + net tree
  EXPECT_EQ(t->table().base.shm.alpha_s, default_table().base.shm.alpha_s);
  std::remove(path);

  Options o;
  o.tuning_file = "/nonexistent/weft-tuning";
  o.log_table = false;
  std::unique_ptr<Tuner> bad;
  Status st = Tuner::create(4, 4, o, &bad);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("WEFT_TUNING_FILE=/nonexistent/weft-tuning"), std::string::npos);
}

TEST(Tuner, SizeClasses) {
  EXPECT_EQ(size_class(0), 0);
  EXPECT_EQ(size_class(1), 1);
  EXPECT_EQ(size_class(2), 2);
  EXPECT_EQ(size_class(3), 2);
  EXPECT_EQ(size_class(4), 3);
  EXPECT_EQ(size_class(1u << 20), 21);
  EXPECT_EQ(size_class((1u << 21) - 1), 21);
}

// WEFT_EXPLAIN: one line per candidate the model compares, its terms adding up to
// its prediction, and the pick marked where choose() picks, across sizes and
// both link classes.
TEST(Explain, TermsAddUpAndThePickIsChoosesPick) {
  for (int local : {4, 1}) {
    auto t = make("", 4, local);
    for (uint64_t count : {1u, 1000u, 1u << 20, 1u << 26}) {
      BuildArgs b{Coll::AllReduce, 4, count, 0, 262144};
      const std::string text = t->explain(Coll::AllReduce, b, 4);
      const std::vector<Prediction> cands = t->candidates(Coll::AllReduce, b, 4);
      ASSERT_FALSE(cands.empty());
      int lines = 0, picks = 0;
      std::istringstream in(text);
      for (std::string line; std::getline(in, line);) {
        char name[64];
        double total = 0, lat = 0, bw = 0, red = 0;
        if (std::sscanf(line.c_str(), "weft explain: %63s %lf us = latency %lf + bandwidth %lf + reduction %lf", name,
                        &total, &lat, &bw, &red) != 5)
          continue;
        ++lines;
        EXPECT_NEAR(lat + bw + red, total, 2e-3 + 1e-6 * total) << line;
        const auto it = std::find_if(cands.begin(), cands.end(),
                                     [&](const Prediction& p) { return std::string(p.algo->name) == name; });
        ASSERT_NE(it, cands.end()) << line;
        EXPECT_NEAR(total, it->seconds * 1e6, 1e-3 + 1e-5 * total) << line;
        if (line.find("<- pick") != std::string::npos) {
          ++picks;
          EXPECT_STREQ(name, pick(*t, Coll::AllReduce, count));
        }
      }
      EXPECT_EQ(lines, int(cands.size())) << text;
      EXPECT_EQ(picks, 1) << text;
      EXPECT_NE(text.find(local == 4 ? "link class shm" : "link class net"), std::string::npos) << text;
    }
  }
}

}  // namespace
}  // namespace weft::tune
