// Every schedule builder by (collective, name), with the alpha-beta-gamma cost the
// builder's comment derives, so the tuner and weft-sim use the same formula.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sched/schedule.h"

namespace weft::algo {

// alpha: per-message latency; beta: per-byte transfer time; gamma: per-byte
// reduction time (Thakur, Rabenseifner, Gropp).
struct LinkCost {
  double alpha_s = 0;
  double beta_s_per_byte = 0;
  double gamma_s_per_byte = 0;
};

using CostFn = double (*)(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);
using SupportsFn = bool (*)(const sched::BuildArgs& args);

// Per level, an algorithm forced by WEFT_HIER_LEVELS, or none: the tuner's choice.
using ForcedLevels = std::array<std::optional<sched::LevelAlgo>, sched::kLevels>;
// What the environment fixes of the choices a builder leaves to the tuner.
struct Forced {
  ForcedLevels levels{};
  int rounds = -1;  // WEFT_HIER_ROUNDS: -1 the tuner's choice, 0 or 1 none, N >= 2 always N
};
// The plans a builder can run for one call: args with each combination of the
// choices it leaves to the tuner (BuildArgs::levels, ::pipeline), `forced` ones fixed.
using VariantsFn = std::vector<sched::BuildArgs> (*)(const sched::BuildArgs& args, const Forced& forced);

struct Algorithm {
  const char* name;
  sched::Coll coll;
  sched::BuildFn build;
  SupportsFn supports = nullptr;  // nullptr: any BuildArgs
  CostFn cost = nullptr;          // nullptr: no model
  bool sliced = false;            // pipelines by BuildArgs::slice_elems (else ignores it)
  // Built for nodes of BuildArgs::local_size ranks: a candidate where the
  // communicator spans nodes; on one node it runs only when named (its formula
  // and constants are for two levels).
  bool two_level = false;
  // Also cuts nodes into domains of BuildArgs::domain_size ranks: a candidate
  // where the communicator spans domains, on one node too.
  bool domain_level = false;
  // Where the builder reads choices beyond the call's shape: its variants, of
  // which the tuner picks one per call (Tuner::tailored).
  VariantsFn variants = nullptr;
  // Those choices in words, for logs and explanations.
  std::string (*describe)(const sched::BuildArgs& args) = nullptr;
};

// All registered (collective, algorithm) pairs, in a fixed order.
std::span<const Algorithm> all_algorithms();
// nullptr when no algorithm of that name exists for the collective.
const Algorithm* find_algorithm(sched::Coll coll, std::string_view name);
// The algorithms registered for one collective, in registry order.
std::vector<const Algorithm*> algorithms_for(sched::Coll coll);
// a.supports(args), treating a missing predicate as "always".
bool supports(const Algorithm& a, const sched::BuildArgs& args);
// The supported algorithm for args.coll with the lowest modelled cost (ties: the
// earlier registry entry); nullptr only if none supports args.
const Algorithm* cheapest(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo
