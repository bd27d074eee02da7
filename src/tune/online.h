// Online tuning: the first calls of each (collective, size class) time the
// algorithms the cost model ranks near its pick, and the fastest, by the slowest
// rank's clock, runs every later call of that class.
//
// Why: a model with fitted constants still mispicks where its formulas miss the
// executor's real costs, and a tuning file fits one machine on one day; measuring
// the calls themselves needs neither. Intel MPI's autotuner (I_MPI_TUNING_AUTO) does
// the same; weft does it by default (WEFT_TUNE_ONLINE=0: the model alone).
//
// Every rank must run the same algorithm for the same call, so the schedule of
// which call runs which candidate depends only on the call sequence (the same on
// every rank), the model (the same table everywhere) and agreed times: after each
// round (one turn per remaining candidate) the communicator all-reduces every
// candidate's median turn with max (the slowest rank's time is the call's). The
// first `rounds` time every candidate (one slow turn, a preemption on an
// oversubscribed host, cannot knock one out); then only those within `keep` of the
// fastest stay for `final_rounds` more, which tell close candidates apart. Each turn
// starts with one untimed call: the previous turn's algorithm left its own scratch
// memory in the caches (and a plan's first call builds it), costs that a class
// running one algorithm call after call does not pay.
//
// A trial is pure bookkeeping: the communicator times each call it is told to and
// runs the agreement; nothing here touches a clock or a peer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/registry.h"

namespace weft::tune {

struct OnlineOptions {
  bool enabled = true;           // WEFT_TUNE_ONLINE
  int rounds = 3;                // WEFT_TUNE_ROUNDS: rounds that time every candidate
  int final_rounds = 2;          // WEFT_TUNE_FINAL_ROUNDS: more rounds for the close ones ...
  double keep = 1.25;            // WEFT_TUNE_KEEP_PCT / 100: ... within this of the fastest
                                 // (a candidate's time: its median turn)
  int max_candidates = 8;        // WEFT_TUNE_CANDIDATES: the model's best this many at most ...
  double range = 3.0;            // WEFT_TUNE_RANGE_PCT / 100: ... predicted within range x the best
  double turn_seconds = 1e-3;    // WEFT_TUNE_TURN_US: a turn's timed calls add up to about this
                                 // much predicted time ...
  int max_turn_calls = 1024;     // ... in 1 to this many calls
  double shared_turn_seconds = 10e-3;  // WEFT_TUNE_TURN_SHARED_US: turn_seconds where the
                                       // communicator's hosts share a machine's cores
                                       // (Tuner: cores_shared_)
  double warmup_seconds = 0;     // a turn's untimed first calls add up to about this much
                                 // predicted time (at least one call): behind token-bucket
                                 // ports (Table::net_burst) the tokens saved up before a
                                 // turn are spent untimed
  static OnlineOptions from_params();
};

// One (collective, size class): its candidates in the model's order (best first),
// the calls so far, and, once settled, the winner.
class Trial {
 public:
  // cands: (algorithm, predicted seconds) in the model's order, best first, for the
  // class's first call; only those within opt.range of the best are kept.
  Trial(const std::vector<std::pair<const algo::Algorithm*, double>>& cands, const OnlineOptions& opt);

  bool settled() const { return winner_ != nullptr; }
  const algo::Algorithm* winner() const { return winner_; }
  // The candidate the next measured call runs (not settled()).
  const algo::Algorithm* current() const { return cands_[active_[static_cast<size_t>(turn_)]].algo; }
  // What a call of `args` in this class runs: the winner, or the candidate whose turn
  // it is; nullptr where there is none or it cannot run this count (a size class
  // spans counts), and then the model's pick runs, untimed.
  const algo::Algorithm* runs(const sched::BuildArgs& args) const {
    const algo::Algorithm* a = settled() ? winner() : ncands() > 0 ? current() : nullptr;
    return a != nullptr && algo::supports(*a, args) ? a : nullptr;
  }
  // One call of current(): its seconds on this rank (ignored for a turn's untimed
  // first call). True when a round has ended: then agree on local_times() and pass
  // the result to agreed().
  bool record(double seconds);
  // This rank's median turn time per candidate (per call), in candidate order.
  std::vector<double> local_times() const;
  // times: every rank's local_times(), element-wise max. Ends the round; from the
  // last full round on keeps only the candidates within `keep` of the fastest, and
  // after the last final round (or with one left) settles on the fastest (ties: the
  // model's order), which it returns.
  const algo::Algorithm* agreed(const std::vector<double>& times);
  // The time the ranks agreed on for `a` (per call, slowest rank), or -1 if it is
  // no candidate or has not been agreed on yet.
  double measured(const algo::Algorithm* a) const;
  // "ring 12.1 us (predicted 10.2 us, 4 turns), tree 19.8 us (predicted 9.9 us, 1 turn) -> ring
  // (model: tree; ...)", once settled.
  std::string explain() const;

  int ncands() const { return static_cast<int>(cands_.size()); }
  int turn_calls() const { return turn_calls_; }      // timed calls per turn ...
  int warmup_calls() const { return warmup_calls_; }  // ... after this many untimed ones

 private:
  struct Cand {
    const algo::Algorithm* algo;
    double predicted;
    std::vector<double> turns;  // seconds per call, one per finished turn
    double agreed = 0;          // its time as of the last agreement
  };
  std::vector<Cand> cands_;
  std::vector<size_t> active_;  // indices into cands_ still measured
  int rounds_ = 0;
  int final_rounds_ = 0;
  double keep_ = 1;
  int turn_calls_ = 1;
  int warmup_calls_ = 1;
  int round_ = 0;            // rounds finished
  int turn_ = 0;             // turns of this round finished
  int calls_in_turn_ = 0;    // calls of the current turn so far, its untimed first ones included
  double turn_seconds_ = 0;  // their seconds
  const algo::Algorithm* winner_ = nullptr;
};

}  // namespace weft::tune
