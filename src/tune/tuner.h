// The tuner: picks the algorithm of every collective call. A forced choice
// (WEFT_ALGO, see algo_spec.h) narrows the candidates; among the candidates that
// support the call, the lowest predicted time wins. On one link level (all ranks on
// one host, or each on its own) the prediction is each algorithm's own
// alpha-beta-gamma formula (algorithms/registry.h) with the constants of the
// communicator's link class (table.h). Where the layout (Options::layout) has more
// than one level, it is the algorithm's real schedule simulated on the layout
// (sim/simulate.h) with the shm constants within a host and the net constants
// across hosts, shared NICs included: each step then pays for the slowest link it
// crosses, and two-level algorithms are credited for keeping bytes off the network.
//
// Every rank must pick the same algorithm: the model's choice depends only on the
// call, the rank count, whether all ranks share one host, and the table, so every
// rank must load the same tuning file. pick() adds online tuning (online.h): the
// first calls of a size class try the model's best few candidates, and the
// communicator agrees on their times before the class settles.
//
// Not thread-safe: the communicator calls it under its execution lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/registry.h"
#include "base/status.h"
#include "sched/schedule.h"
#include "sim/fabric.h"
#include "tune/algo_spec.h"
#include "tune/online.h"
#include "tune/table.h"

namespace weft::tune {

struct Options {
  std::string algo;          // WEFT_ALGO, or weftConfig_t.algo where a communicator sets it
  const char* algo_source = "WEFT_ALGO";  // which of the two, for messages
  std::string hier_levels;   // WEFT_HIER_LEVELS
  int hier_rounds = -1;      // WEFT_HIER_ROUNDS
  std::string tuning_file;   // WEFT_TUNING_FILE; empty: the built-in defaults
  bool log_table = true;     // print the constants at INFO (one rank is enough)
  bool explain = false;      // WEFT_EXPLAIN on this rank: print each size class's candidates and pick
  OnlineOptions online;      // WEFT_TUNE_*
  // Where the ranks are: host and domain per rank and each host's network port
  // (its costs are ignored: they come from the table). nranks 0: unknown, one level.
  sim::Fabric layout;
  // weft-sim: the layout's own costs are the model (simulated even on one level)
  // instead of the table's.
  bool layout_costs = false;
  static Options from_params();
};

struct Prediction {
  const algo::Algorithm* algo;
  double seconds;
};

// What runs one call: the algorithm, and while its size class is still being
// measured, the trial to record the call's time in (else nullptr).
struct Pick {
  const algo::Algorithm* algo = nullptr;
  Trial* trial = nullptr;
};

class Tuner {
 public:
  // local_ranks: ranks on this rank's host (itself included). All ranks on one
  // host -> shared-memory constants, else network constants.
  static Status create(int nranks, int local_ranks, std::unique_ptr<Tuner>* out);
  static Status create(int nranks, int local_ranks, const Options& opt, std::unique_ptr<Tuner>* out);

  // *out = the model's algorithm for `args` (args.coll must equal coll) with
  // elements of elem_size bytes: the lowest prediction among what WEFT_ALGO allows.
  // weftInvalidArgument if WEFT_ALGO names a choice that cannot run this call.
  // internal: a call of weft's own (online tuning's agreement), not explained.
  Status choose(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size,
                const algo::Algorithm** out, bool internal = false);
  // The algorithm of one call with online tuning: the settled winner of the call's
  // (collective, size class), or the candidate whose turn it is, or choose()'s pick
  // where online tuning is off, has one candidate, or the class's pick cannot run
  // this call. Advances nothing: the communicator records the time in out->trial.
  Status pick(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size, Pick* out);
  // What pick() would run now, without starting a trial; *settled false while the
  // class is still being measured (later calls may run another algorithm).
  Status query(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size,
               const algo::Algorithm** out, bool* settled) const;

  // Every candidate that could run `args` under the forced choice, with its
  // predicted time, in registry order (what choose() compares; for tests and tools).
  std::vector<Prediction> candidates(sched::Coll coll, const sched::BuildArgs& args,
                                     size_t elem_size) const;
  double predict(const algo::Algorithm& a, const sched::BuildArgs& args, size_t elem_size) const;
  // Every candidate (as candidates()) and the lowest prediction among them (ties:
  // registry order); weftInvalidArgument naming the forced choice if none can run.
  Status model_pick(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size,
                    std::vector<Prediction>* cands, const Prediction** best) const;
  // Calls whose counts never repeat (variable-length all-gathers) would grow the
  // per-shape caches (picks, variants) without end, as they did the plan cache:
  // each is emptied when it holds this many shapes, and refills as calls come.
  static constexpr size_t kMaxCachedShapes = 4096;
  // Shapes whose picks are cached (for tests: at most kMaxCachedShapes).
  size_t cached_picks() const { return picks_.size(); }
  // args with the choices a's builder leaves to the tuner (Algorithm::variants;
  // hierarchical's level algorithms) set to its first variant (rings), or to the
  // fastest predicted where that is at least 10% faster (kVariantGain): what the
  // communicator builds, the predictions price and weft-sim simulates. Depends
  // only on the call and the table, so every rank tailors alike.
  sched::BuildArgs tailored(const algo::Algorithm& a, const sched::BuildArgs& args, size_t elem_size) const;
  // One candidate of an explanation. On one level the latency (alpha), bandwidth
  // (beta) and reduction (gamma) terms add up to predicted; where predictions are
  // simulations each is the simulated time with only its constants. predicted < 0:
  // no model (forced). measured: online tuning's agreed time for the call's size
  // class, < 0 until it has one. cost: the constants (simulated: shm's; numa_cost and net_cost the other levels').
  struct Term {
    const algo::Algorithm* algo = nullptr;
    std::string choices;  // Algorithm::describe of the tailored call, else empty
    double predicted = 0, latency = 0, bandwidth = 0, reduction = 0, measured = -1;
    bool simulated = false;  // this prediction is a simulation
    algo::LinkCost cost, numa_cost, net_cost;
  };
  struct Explanation {
    std::vector<Term> terms;  // every candidate, registry order
    const algo::Algorithm* pick = nullptr;  // the model's
    bool simulated = false;  // the communicator's predictions are simulations (some may
                             // fall back to formulas: Term::simulated)
  };
  Status explain_terms(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size, Explanation* out) const;
  // WEFT_EXPLAIN's text for a call: explain_terms() one line per candidate.
  std::string explain(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size) const;
  bool explaining() const { return explain_; }

  // Online tuning's settled picks, one line per (collective, size class):
  // "<ranks> <link class> <collective> <size class> <algorithm>", so that a
  // resumed run settles alike (WEFT_TUNE_STATE_FILE, weftCommGetTuning).
  std::string settled_state() const;
  // Settles the classes that such lines name for this rank count and link class
  // on their algorithm (other lines are skipped). `source` names the text in errors.
  Status load_state(const std::string& text, const std::string& source);

  LinkClass link_class() const { return cls_; }
  // True where predictions are simulations on the layout (more than one level).
  bool simulating() const { return simulate_; }
  const Table& table() const { return table_; }
  const AlgoSpec& spec() const { return spec_; }

 private:
  Tuner() = default;

  int nranks_ = 1;
  LinkClass cls_ = LinkClass::Shm;
  bool simulate_ = false, layout_costs_ = false;
  // Some machine of the layout has fewer cores than ranks: there its links inside
  // and across hosts (namespaces of one kernel) move bytes with the same cores.
  bool cores_shared_ = false;
  sim::Fabric layout_, grouped_;  // the ranks' layout, and in sim::grouped_order
  Table table_;
  AlgoSpec spec_;
  algo::Forced forced_{};
  std::string hier_levels_;  // as given, for messages
  struct Variant {
    sched::BuildArgs args;
    double seconds;
  };
  // (algorithm, ranks, count, element size, root, slice, local size, domain size)
  // -> its fastest variant, so that a shape's variants are simulated once.
  mutable std::map<std::tuple<const algo::Algorithm*, int, uint64_t, size_t, int, uint64_t, int, int>, Variant>
      variants_;
  const Variant& best_variant(const algo::Algorithm& a, const sched::BuildArgs& args, size_t elem_size) const;
  // The prediction of the plan args describe as they are (no variants).
  double predict_plan(const algo::Algorithm& a, const sched::BuildArgs& args, size_t elem_size) const;
  // (collective, power-of-two size class) already explained at INFO / by WEFT_EXPLAIN.
  std::set<std::pair<int, int>> logged_, explained_;
  bool explain_ = false;
  // (collective, ranks, count, element size, root, slice, local size) -> pick, so the
  // per-call cost of choosing is one map lookup.
  using PickKey = std::tuple<int, int, uint64_t, size_t, int, uint64_t, int, int>;
  static PickKey pick_key(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size);
  std::map<PickKey, const algo::Algorithm*> picks_;
  OnlineOptions online_;
  // (collective, size class) -> its online trial, made at the class's first call.
  std::map<std::pair<int, int>, Trial> trials_;
  // Whether a's prediction for this call is a simulation: the layout has several
  // levels, and the schedule is small enough to simulate at once.
  bool simulates(const algo::Algorithm& a, const sched::BuildArgs& args) const;
  // The layout (host-grouped for relabelable collectives, sched::relabelable) with
  // the table's constants for this call: shm within a host, net across.
  sim::Fabric priced(const sched::BuildArgs& args, size_t elem_size) const;
  // The constants an algorithm's formula takes where it is not simulated: the
  // communicator's class's, its wire delay (net) counted in every alpha.
  algo::LinkCost formula_cost(sched::Coll coll, const char* algo, int nranks, uint64_t bytes) const;
  // The trial a call of `args` starts, from the model's ranking for it.
  Trial new_trial(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size) const;
};

// The power-of-two bucket of a byte count: 0 for 0 bytes, else floor(log2(bytes)) + 1.
int size_class(uint64_t bytes);

}  // namespace weft::tune
