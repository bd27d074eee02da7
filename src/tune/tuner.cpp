#include "tune/tuner.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "base/log.h"
#include "base/params.h"
#include "sim/simulate.h"

namespace weft::tune {

int size_class(uint64_t bytes) {
  int c = 0;
  while (bytes != 0) {
    ++c;
    bytes >>= 1;
  }
  return c;
}

namespace {
Status parse_levels(const std::string& text, algo::ForcedLevels* out) {
  *out = {};
  size_t level = 0, pos = 0;
  while (pos <= text.size() && !text.empty()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string name = text.substr(pos, end - pos);
    sched::LevelAlgo a;
    if (level >= out->size())
      return Error(weftInvalidArgument, "WEFT_HIER_LEVELS=%s: more than %d levels", text.c_str(), sched::kLevels);
    if (sched::parse_level_algo(name, &a)) (*out)[level] = a;
    else if (name != "auto" && !name.empty())
      return Error(weftInvalidArgument, "WEFT_HIER_LEVELS=%s: '%s' is not ring, rabenseifner, recdoubling or auto",
                   text.c_str(), name.c_str());
    ++level;
    pos = end + 1;
  }
  return Status::Ok();
}
}  // namespace

Options Options::from_params() {
  Options o;
  o.algo = params::ALGO();
  o.hier_levels = params::HIER_LEVELS();
  o.hier_rounds = static_cast<int>(params::HIER_ROUNDS());
  o.tuning_file = params::TUNING_FILE();
  o.online = OnlineOptions::from_params();
  return o;
}

Status Tuner::create(int nranks, int local_ranks, std::unique_ptr<Tuner>* out) {
  return create(nranks, local_ranks, Options::from_params(), out);
}

Status Tuner::create(int nranks, int local_ranks, const Options& opt, std::unique_ptr<Tuner>* out) {
  std::unique_ptr<Tuner> t(new Tuner);
  t->nranks_ = nranks;
  t->cls_ = local_ranks >= nranks ? LinkClass::Shm : LinkClass::Net;
  t->online_ = opt.online;
  t->explain_ = opt.explain;
  t->online_.enabled = opt.online.enabled && nranks > 1;  // one rank: every algorithm is a local copy
  t->table_ = default_table();
  if (!opt.tuning_file.empty()) WEFT_TRY(load_tuning_file(opt.tuning_file, &t->table_));
  // Behind token buckets a turn that follows idle time (the agreement, another
  // candidate's lighter calls) starts with up to a burst saved up: spend two
  // bursts' worth of the sustained rate untimed first.
  if (t->table_.net_burst.bytes > 0 && nranks > local_ranks)
    t->online_.warmup_seconds = std::max(t->online_.warmup_seconds,
                                         2 * t->table_.net_burst.bytes * t->table_.base.net.beta_s_per_byte);
  WEFT_TRY(parse_algo_spec(opt.algo, &t->spec_, opt.algo_source));
  WEFT_TRY(parse_levels(opt.hier_levels, &t->forced_.levels));
  t->forced_.rounds = opt.hier_rounds;
  t->hier_levels_ = opt.hier_levels;
  if (opt.layout.nranks == nranks && opt.layout.check().empty() &&
      (opt.layout.levels_used() > 1 || opt.layout_costs)) {
    t->layout_ = opt.layout;
    t->grouped_ = sim::reordered(opt.layout, sim::grouped_order(opt.layout));
    t->simulate_ = true;
    t->layout_costs_ = opt.layout_costs;
    for (int r = 0; r < nranks && !t->cores_shared_; ++r) t->cores_shared_ = opt.layout.oversubscribed(r);
  }
  // Namespace hosts of one kernel with fewer cores than ranks: a 4-64 KiB call's
  // time there varies 2x from one 10 ms batch to the next (bench/topology), and 1 ms
  // turns settled on algorithms 1.25x slower than the fastest.
  if (t->cores_shared_) t->online_.turn_seconds = t->online_.shared_turn_seconds;
  if (opt.log_table && log::enabled(log::Level::Info, log::Subsys::TUNE)) {
    WEFT_INFO(TUNE, "%d ranks, %d on this host: link class %s%s; %s=%s; online tuning %s; constants from %s:",
              nranks, local_ranks, link_class_name(t->cls_),
              t->simulate_ ? " (schedules simulated on the ranks' layout: shm within NUMA domains, numa across "
                             "a host's domains, net across hosts)"
                           : "",
              opt.algo_source,
              opt.algo.empty() ? "(auto)" : opt.algo.c_str(), t->online_.enabled ? "on" : "off",
              opt.tuning_file.empty() ? "built-in defaults" : opt.tuning_file.c_str());
    std::istringstream lines(format_table(t->table_));
    for (std::string line; std::getline(lines, line);) WEFT_INFO(TUNE, "  %s", line.c_str());
  }
  *out = std::move(t);
  return Status::Ok();
}

sim::Fabric Tuner::priced(const sched::BuildArgs& args, size_t elem_size) const {
  // Only the class's generic and per-collective constants: the per-algorithm
  // entries are fits of one algorithm's whole formula on one level (a 4-rank ring
  // on one host), not costs of a message on a link.
  // Relabelable collectives run in host-grouped order (the communicator's too).
  const sim::Fabric& where = sched::relabelable(args.coll) ? grouped_ : layout_;
  if (layout_costs_) return where;
  const uint64_t bytes = args.count * elem_size;
  sim::Fabric f = where;
  if (table_.cores.cpu_share >= 0)
    f.cpu_share = table_.cores.cpu_share, f.net_rx_s_per_byte = table_.cores.net_rx_s_per_byte;
  f.cost = {table_.lookup(LinkClass::Shm, args.coll, "*", args.nranks, bytes),
            table_.lookup(LinkClass::Numa, args.coll, "*", args.nranks, bytes),
            table_.lookup(LinkClass::Net, args.coll, "*", args.nranks, bytes)};
  if (table_.net_burst.bytes > 0)
    for (sim::Port& p : f.nics)
      p.burst_bytes = table_.net_burst.bytes, p.line_bytes_per_s = 1 / table_.net_burst.line_s_per_byte;
  f.net_wire_s = table_.net_wire_s;
  return f;
}

algo::LinkCost Tuner::formula_cost(sched::Coll coll, const char* algo, int nranks, uint64_t bytes) const {
  algo::LinkCost c = table_.lookup(cls_, coll, algo, nranks, bytes);
  if (cls_ == LinkClass::Net) c.alpha_s += table_.net_wire_s;
  return c;
}

namespace {
double simulated(const algo::Algorithm& a, const sched::BuildArgs& args, size_t elem_size, const sim::Fabric& f) {
  sim::Result r;
  const Status st = sim::simulate(sched::build_all(args, a.name, a.build), f, elem_size, &r);
  // A schedule the simulator rejects would fail the verifier too: never pick it.
  if (!st.ok()) {
    WEFT_WARN(TUNE, "%s", st.message().c_str());
    return 1e30;
  }
  return r.seconds;
}
}  // namespace

// A simulation's time grows with the schedule's steps; past this many (an
// all-to-all-like algorithm at many ranks and slices) the formula with the network's
// constants, the slowest link, stands in, so that a new call shape costs at most
// some 50 ms per candidate to decide. weft-sim (layout_costs_) has its own limit.
constexpr double kMaxSimulatedMessages = 5e5;

bool Tuner::simulates(const algo::Algorithm& a, const sched::BuildArgs& args) const {
  if (!simulate_ || args.nranks != layout_.nranks) return false;
  if (layout_costs_) return true;
  // Rank 0's steps times the ranks: the schedule's size, at the cost of one plan.
  // Behind token buckets the simulator runs several calls.
  const double limit =
      kMaxSimulatedMessages / (table_.net_burst.bytes > 0 && !layout_.nics.empty() ? sim::kMaxSimulatedCalls : 1);
  return a.cost != nullptr && static_cast<double>(a.build(args, 0).steps.size()) * args.nranks <= limit;
}

sched::BuildArgs Tuner::tailored(const algo::Algorithm& a, const sched::BuildArgs& args, size_t elem_size) const {
  return a.variants != nullptr ? best_variant(a, args, elem_size).args : args;
}

double Tuner::predict(const algo::Algorithm& a, const sched::BuildArgs& args, size_t elem_size) const {
  return a.variants != nullptr ? best_variant(a, args, elem_size).seconds : predict_plan(a, args, elem_size);
}

// A variant's prediction must beat the default's by this factor: measured on
// tc-shaped network namespaces (bench/topology), hierarchical with whole-message
// Rabenseifner levels predicted 0.5% faster than with its sliced rings ran 10-16%
// slower at 16-64 MiB; where the variants differ by more (recdoubling across
// hosts at 4-16 KiB: predicted 2.4x, measured 2.1x faster) the model holds.
constexpr double kVariantGain = 0.9;

const Tuner::Variant& Tuner::best_variant(const algo::Algorithm& a, const sched::BuildArgs& args,
                                          size_t elem_size) const {
  const auto key = std::make_tuple(&a, args.nranks, args.count, elem_size, args.root, args.slice_elems,
                                   args.local_size, args.domain_size);
  auto hit = variants_.find(key);
  if (hit != variants_.end()) return hit->second;
  if (variants_.size() >= kMaxCachedShapes) variants_.clear();
  // The first variant that can run (rings wherever not forced) is the default;
  // another replaces it only where predicted below kVariantGain times its time.
  const std::vector<sched::BuildArgs> all = a.variants(args, forced_);  // never empty
  Variant first{all.front(), 1e30}, best = first;  // where none can run: the first, refused
  bool found = false;
  for (const sched::BuildArgs& v : all) {
    if (!algo::supports(a, v)) continue;
    // Overlapping hierarchical's levels pays where separate links move the bytes.
    // On machines whose ranks outnumber their cores the copies inside and across
    // namespace hosts take the same cores, which the simulation does not charge
    // for bytes: 8 rounds measured up to 1.4x slower at 2 hosts x 2 ranks on 2
    // cores (unshaped veth, 64 MiB) where it predicted them 10% faster.
    if (v.pipeline > 1 && cores_shared_ && forced_.rounds < 0) continue;
    const double t = predict_plan(a, v, elem_size);
    if (!found) first = best = {v, t};
    else if (t < best.seconds) best = {v, t};  // ties keep the earlier
    found = true;
  }
  return variants_.emplace(key, best.seconds < kVariantGain * first.seconds ? best : first).first->second;
}

double Tuner::predict_plan(const algo::Algorithm& a, const sched::BuildArgs& args, size_t elem_size) const {
  if (simulates(a, args)) return simulated(a, args, elem_size, priced(args, elem_size));
  const uint64_t bytes = args.count * elem_size;
  const algo::LinkCost c = formula_cost(args.coll, a.name, args.nranks, bytes);
  return a.cost(args, elem_size, c);
}

Status Tuner::explain_terms(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size,
                            Explanation* out) const {
  std::vector<Prediction> cands;
  const Prediction* best = nullptr;
  WEFT_TRY(model_pick(coll, args, elem_size, &cands, &best));
  *out = {};
  out->pick = best->algo;
  out->simulated = simulate_;
  const uint64_t bytes = args.count * elem_size;
  auto trial = trials_.find(std::make_pair(static_cast<int>(coll), size_class(bytes)));
  for (const Prediction& p : cands) {
    Term t;
    t.algo = p.algo;
    const sched::BuildArgs call = tailored(*p.algo, args, elem_size);
    if (p.algo->describe != nullptr) t.choices = p.algo->describe(call);
    t.predicted = p.seconds;
    t.measured = trial != trials_.end() ? trial->second.measured(p.algo) : -1;
    if (p.algo->cost == nullptr) {
      t.predicted = -1;
    } else if (simulates(*p.algo, call)) {
      t.simulated = true;
      // A simulation is not linear in the constants (overlaps shift with them):
      // each term is the simulated time with only its constants left, so they need
      // not add up to the prediction.
      const sim::Fabric full = priced(call, elem_size);
      sim::Fabric f = full;
      double* alone[3] = {&t.latency, &t.bandwidth, &t.reduction};
      for (int term = 0; term < 3; ++term) {
        for (size_t l = 0; l < f.cost.size(); ++l) {
          const algo::LinkCost& c = full.cost[l];
          f.cost[l] = {term == 0 ? c.alpha_s : 0, term == 1 ? c.beta_s_per_byte : 0, term == 2 ? c.gamma_s_per_byte : 0};
        }
        // Shared ports are bandwidth: only the bandwidth term keeps them; the wire is latency.
        f.net_wire_s = term == 0 ? full.net_wire_s : 0;
        f.nics = term == 1 ? full.nics : std::vector<sim::Port>(full.nics.size());
        f.cross_domain = term == 1 ? full.cross_domain : std::vector<sim::Port>(full.cross_domain.size());
        *alone[term] = simulated(*p.algo, call, elem_size, f);
      }
      t.cost = full.cost[0];
      t.numa_cost = full.cost[1];
      t.net_cost = full.cost[2];
    } else {
      // The formulas are linear in the constants: each term alone is the formula
      // with the other two constants zero.
      const algo::LinkCost c = formula_cost(coll, p.algo->name, args.nranks, bytes);
      t.latency = p.algo->cost(call, elem_size, {c.alpha_s, 0, 0});
      t.bandwidth = p.algo->cost(call, elem_size, {0, c.beta_s_per_byte, 0});
      t.reduction = p.algo->cost(call, elem_size, {0, 0, c.gamma_s_per_byte});
      t.cost = t.numa_cost = t.net_cost = c;
    }
    out->terms.push_back(t);
  }
  return Status::Ok();
}

std::string Tuner::explain(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size) const {
  const uint64_t bytes = args.count * elem_size;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "weft explain: %s %llu B (size class %d), %d ranks, link class %s%s:\n",
                sched::coll_name(coll), static_cast<unsigned long long>(bytes), size_class(bytes), args.nranks,
                layout_costs_ ? "the layout's own (simulated)"
                : simulate_   ? "the ranks' layout's: shm, numa, net (simulated)"
                              : link_class_name(cls_),
                spec_.filter(coll).active ? (", " + spec_.describe()).c_str() : "");
  std::string out = buf;
  Explanation e;
  if (!explain_terms(coll, args, elem_size, &e).ok()) return out + "weft explain:   no candidate can run it\n";
  for (const Term& t : e.terms) {
    const char* pick = t.algo == e.pick ? "  <- pick" : "";
    const std::string label = t.choices.empty() ? t.algo->name : std::string(t.algo->name) + " [" + t.choices + "]";
    if (t.predicted < 0) {
      std::snprintf(buf, sizeof(buf), "weft explain:   %-22s no model (forced)\n", label.c_str());
    } else if (t.simulated) {
      // The constants of each link level the layout has.
      std::string levels;
      const char* sep = "";
      for (const auto& [level, c] : {std::pair{sim::Level::Domain, t.cost}, std::pair{sim::Level::Host, t.numa_cost},
                                     std::pair{sim::Level::Network, t.net_cost}}) {
        if (!layout_.uses(level) && level != sim::Level::Domain) continue;
        char one[96];
        std::snprintf(one, sizeof(one), "%s%s alpha %.3g us beta %.3g ns/B", sep,
                      level == sim::Level::Domain ? "shm" : level == sim::Level::Host ? "numa" : "net",
                      c.alpha_s * 1e6, c.beta_s_per_byte * 1e9);
        levels += one;
        sep = "; ";
      }
      std::snprintf(buf, sizeof(buf),
                    "weft explain:   %-22s %10.3f us simulated; alone: latency %.3f, bandwidth %.3f, reduction %.3f"
                    "   (%s)%s\n",
                    label.c_str(), t.predicted * 1e6, t.latency * 1e6, t.bandwidth * 1e6, t.reduction * 1e6,
                    levels.c_str(), pick);
    } else {
      std::snprintf(buf, sizeof(buf),
                    "weft explain:   %-22s %10.3f us = latency %.3f + bandwidth %.3f + reduction %.3f"
                    "   (alpha %.3g us, beta %.3g ns/B, gamma %.3g ns/B)%s\n",
                    label.c_str(), t.predicted * 1e6, t.latency * 1e6, t.bandwidth * 1e6, t.reduction * 1e6,
                    t.cost.alpha_s * 1e6, t.cost.beta_s_per_byte * 1e9, t.cost.gamma_s_per_byte * 1e9, pick);
    }
    out += buf;
  }
  return out;
}

std::vector<Prediction> Tuner::candidates(sched::Coll coll, const sched::BuildArgs& args,
                                          size_t elem_size) const {
  std::vector<Prediction> out;
  const CollFilter& f = spec_.filter(coll);
  for (const algo::Algorithm* a : algo::algorithms_for(coll)) {
    if (!f.allows(a->name) || !algo::supports(*a, tailored(*a, args, elem_size))) continue;
    // On one host a two-level algorithm is a flat one under another formula (for
    // hierarchical, the ring's without its pipeline slices: 10x too cheap with
    // the ring's constants). It runs there only when named, or where the host's
    // ranks span NUMA domains and it cuts the host by them.
    const bool named = f.active && !f.exclude;
    const bool one_node = args.local_size >= args.nranks;
    const bool one_domain = args.domain_size <= 0 || args.domain_size >= args.local_size;
    if (a->two_level && one_node && !(a->domain_level && !one_domain) && !named) continue;
    // Without a model an algorithm runs only when forced alone.
    if (a->cost == nullptr && !(f.active && !f.exclude && f.names.size() == 1)) continue;
    out.push_back({a, a->cost != nullptr ? predict(*a, args, elem_size) : 0.0});
  }
  return out;
}

Status Tuner::model_pick(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size,
                         std::vector<Prediction>* cands, const Prediction** best) const {
  *cands = candidates(coll, args, elem_size);
  if (cands->empty()) {
    std::string avail;
    for (const algo::Algorithm* a : algo::algorithms_for(coll))
      if (algo::supports(*a, tailored(*a, args, elem_size))) avail += (avail.empty() ? "" : ", ") + std::string(a->name);
    return Error(weftInvalidArgument, "%s%s%s: no algorithm it allows can run %s with %d ranks (available: %s)",
                 spec_.describe().c_str(), hier_levels_.empty() ? "" : ", WEFT_HIER_LEVELS=",
                 hier_levels_.c_str(), sched::coll_name(coll), args.nranks, avail.empty() ? "none" : avail.c_str());
  }
  // Lower by more than rounding wins, so ties go to the earlier (registry-order)
  // algorithm: two schedules that move the same messages (hierarchical and
  // chain_tree with two ranks a host) simulate equal but for the last bits.
  *best = &(*cands)[0];
  for (const Prediction& p : *cands)
    if (p.seconds < (*best)->seconds * (1 - 1e-9)) *best = &p;
  return Status::Ok();
}

Tuner::PickKey Tuner::pick_key(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size) {
  return std::make_tuple(static_cast<int>(coll), args.nranks, args.count, elem_size, args.root, args.slice_elems,
                         args.local_size, args.domain_size);
}

Status Tuner::choose(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size,
                     const algo::Algorithm** out, bool internal) {
  const PickKey key = pick_key(coll, args, elem_size);
  auto hit = picks_.find(key);
  if (hit != picks_.end()) {
    *out = hit->second;
    return Status::Ok();
  }
  std::vector<Prediction> cands;
  const Prediction* best = nullptr;
  WEFT_TRY(model_pick(coll, args, elem_size, &cands, &best));
  *out = best->algo;
  if (picks_.size() >= kMaxCachedShapes) picks_.clear();
  picks_.emplace(key, best->algo);

  const uint64_t bytes = args.count * elem_size;
  if (explain_ && !internal && explained_.emplace(static_cast<int>(coll), size_class(bytes)).second)
    std::fprintf(stderr, "%s", explain(coll, args, elem_size).c_str());
  if (log::enabled(log::Level::Info, log::Subsys::TUNE) &&
      logged_.emplace(static_cast<int>(coll), size_class(bytes)).second) {
    std::string line;
    char buf[96];
    for (const Prediction& p : cands) {
      std::snprintf(buf, sizeof(buf), "%s%s %.3g us", line.empty() ? "" : ", ", p.algo->name, p.seconds * 1e6);
      line += buf;
    }
    WEFT_INFO(TUNE, "%s %llu B (size class %d, %d ranks, %s): %s -> %s", sched::coll_name(coll),
              static_cast<unsigned long long>(bytes), size_class(bytes), args.nranks,
              link_class_name(cls_), line.c_str(), best->algo->name);
  }
  return Status::Ok();
}

Trial Tuner::new_trial(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size) const {
  std::vector<std::pair<const algo::Algorithm*, double>> ranked;
  if (online_.enabled)
    for (const Prediction& p : candidates(coll, args, elem_size))
      if (p.algo->cost != nullptr) ranked.emplace_back(p.algo, p.seconds);
  // Stable: equal predictions keep registry order, as choose() breaks ties.
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
  return Trial(ranked, online_);
}

Status Tuner::pick(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size, Pick* out) {
  const uint64_t bytes = args.count * elem_size;
  *out = {};
  if (online_.enabled && bytes > 0) {
    const auto key = std::make_pair(static_cast<int>(coll), size_class(bytes));
    auto it = trials_.find(key);
    if (it == trials_.end()) {
      // The model's pick first: it is the trial's first candidate, and choose()
      // explains the predictions at INFO and rejects an impossible forced choice.
      const algo::Algorithm* model = nullptr;
      WEFT_TRY(choose(coll, args, elem_size, &model));
      it = trials_.emplace(key, new_trial(coll, args, elem_size)).first;
    }
    Trial& t = it->second;
    if (const algo::Algorithm* a = t.runs(args)) {
      out->algo = a;
      out->trial = t.settled() ? nullptr : &t;
      return Status::Ok();
    }
  }
  return choose(coll, args, elem_size, &out->algo);
}

Status Tuner::query(sched::Coll coll, const sched::BuildArgs& args, size_t elem_size,
                    const algo::Algorithm** out, bool* settled) const {
  const uint64_t bytes = args.count * elem_size;
  *settled = true;
  if (online_.enabled && bytes > 0) {
    auto it = trials_.find(std::make_pair(static_cast<int>(coll), size_class(bytes)));
    // A class without a trial yet: whether its first call would start measuring.
    const Trial fresh = it != trials_.end() ? Trial({}, online_) : new_trial(coll, args, elem_size);
    const Trial& t = it != trials_.end() ? it->second : fresh;
    if (const algo::Algorithm* a = t.runs(args)) {
      *settled = t.settled();
      if (*settled) {
        *out = a;
        return Status::Ok();
      }
    }
  }
  // The model's pick of a call already made: a trial's calls ask after every call
  // (weft-perf's warm-up loop), and simulating every candidate each time, 8-16 calls
  // each behind token buckets, took 0.5 ms per call at 8 ranks.
  if (auto hit = picks_.find(pick_key(coll, args, elem_size)); hit != picks_.end()) {
    *out = hit->second;
    return Status::Ok();
  }
  std::vector<Prediction> cands;
  const Prediction* best = nullptr;
  WEFT_TRY(model_pick(coll, args, elem_size, &cands, &best));
  *out = best->algo;
  return Status::Ok();
}

std::string Tuner::settled_state() const {
  std::string out;
  for (const auto& [key, trial] : trials_) {
    if (!trial.settled()) continue;
    char line[160];
    std::snprintf(line, sizeof(line), "%d %s %s %d %s\n", nranks_, link_class_name(cls_),
                  sched::coll_name(static_cast<sched::Coll>(key.first)), key.second, trial.winner()->name);
    out += line;
  }
  return out;
}

Status Tuner::load_state(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    int ranks = 0, cls = 0;
    std::string link, coll_name, algo_name;
    sched::Coll coll;
    if (!(f >> ranks >> link >> coll_name >> cls >> algo_name) || !parse_coll(coll_name, &coll))
      return Error(weftInvalidArgument, "%s line %d: '%s' is not '<ranks> <link class> <collective> <size class> "
                   "<algorithm>'", source.c_str(), n, line.c_str());
    if (ranks != nranks_ || link != link_class_name(cls_) || !online_.enabled) continue;
    const algo::Algorithm* a = algo::find_algorithm(coll, algo_name);
    if (a == nullptr)
      return Error(weftInvalidArgument, "%s line %d: no algorithm '%s' for %s", source.c_str(), n,
                   algo_name.c_str(), coll_name.c_str());
    // A trial of one candidate is settled on it.
    trials_.insert_or_assign(std::make_pair(static_cast<int>(coll), cls), Trial({{a, 0.0}}, online_));
  }
  return Status::Ok();
}

}  // namespace weft::tune
