#include "tune/online.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/params.h"

namespace weft::tune {

OnlineOptions OnlineOptions::from_params() {
  OnlineOptions o;
  o.enabled = params::TUNE_ONLINE() != 0;
  o.rounds = static_cast<int>(std::clamp<int64_t>(params::TUNE_ROUNDS(), 1, 99));
  o.final_rounds = static_cast<int>(std::clamp<int64_t>(params::TUNE_FINAL_ROUNDS(), 0, 99));
  o.keep = std::max<double>(1.0, static_cast<double>(params::TUNE_KEEP_PCT()) / 100.0);
  o.max_candidates = static_cast<int>(std::clamp<int64_t>(params::TUNE_CANDIDATES(), 1, 64));
  o.range = std::max<double>(1.0, static_cast<double>(params::TUNE_RANGE_PCT()) / 100.0);
  o.turn_seconds = std::max<double>(0.0, static_cast<double>(params::TUNE_TURN_US()) * 1e-6);
  o.shared_turn_seconds = std::max<double>(0.0, static_cast<double>(params::TUNE_TURN_SHARED_US()) * 1e-6);
  return o;
}

Trial::Trial(const std::vector<std::pair<const algo::Algorithm*, double>>& cands, const OnlineOptions& opt)
    : rounds_(opt.rounds), final_rounds_(opt.final_rounds), keep_(opt.keep) {
  const double best = cands.empty() ? 0 : cands.front().second;
  for (const auto& [a, predicted] : cands)
    if (static_cast<int>(cands_.size()) < opt.max_candidates && predicted <= best * opt.range) {
      active_.push_back(cands_.size());
      cands_.push_back({a, predicted, {}});
    }
  // Small calls are timed in batches: one 1 us call is mostly timer and scheduler.
  const double calls = best > 0 ? std::ceil(opt.turn_seconds / best) : 1.0;
  turn_calls_ = static_cast<int>(std::clamp(calls, 1.0, static_cast<double>(opt.max_turn_calls)));
  const double warmup = best > 0 ? std::ceil(opt.warmup_seconds / best) : 1.0;
  warmup_calls_ = static_cast<int>(std::clamp(warmup, 1.0, static_cast<double>(opt.max_turn_calls)));
  if (cands_.size() == 1) winner_ = cands_.front().algo;  // nothing to compare
}

bool Trial::record(double seconds) {
  if (calls_in_turn_++ >= warmup_calls_) turn_seconds_ += seconds;
  if (calls_in_turn_ < warmup_calls_ + turn_calls_) return false;
  cands_[active_[static_cast<size_t>(turn_)]].turns.push_back(turn_seconds_ / turn_calls_);
  calls_in_turn_ = 0;
  turn_seconds_ = 0;
  return ++turn_ == static_cast<int>(active_.size());
}

std::vector<double> Trial::local_times() const {
  std::vector<double> out;
  for (const Cand& c : cands_) {
    std::vector<double> t = c.turns;
    std::sort(t.begin(), t.end());
    out.push_back(t.empty() ? 0.0 : (t[(t.size() - 1) / 2] + t[t.size() / 2]) / 2);
  }
  return out;
}

const algo::Algorithm* Trial::agreed(const std::vector<double>& times) {
  for (size_t i : active_) cands_[i].agreed = i < times.size() ? times[i] : 0.0;
  size_t best = active_.front();
  for (size_t i : active_)
    if (cands_[i].agreed < cands_[best].agreed) best = i;
  ++round_;
  turn_ = 0;
  if (round_ >= rounds_) {
    std::vector<size_t> kept;
    for (size_t i : active_)
      if (cands_[i].agreed <= cands_[best].agreed * keep_) kept.push_back(i);
    active_ = kept;
  }
  if (round_ >= rounds_ + final_rounds_ || active_.size() == 1) winner_ = cands_[best].algo;
  return winner_;
}

double Trial::measured(const algo::Algorithm* a) const {
  for (const Cand& c : cands_)
    if (c.algo == a) return c.agreed > 0 ? c.agreed : -1;
  return -1;
}

std::string Trial::explain() const {
  std::string s;
  char buf[128];
  for (const Cand& c : cands_) {
    std::snprintf(buf, sizeof(buf), "%s%s %.3g us (predicted %.3g us, %zu turn%s)", s.empty() ? "" : ", ",
                  c.algo->name, c.agreed * 1e6, c.predicted * 1e6, c.turns.size(), c.turns.size() == 1 ? "" : "s");
    s += buf;
  }
  std::snprintf(buf, sizeof(buf), " -> %s (model: %s; turns of %d calls, %d rounds)", winner_ ? winner_->name : "-",
                cands_.front().algo->name, turn_calls_, round_);
  return s + buf;
}

}  // namespace weft::tune
