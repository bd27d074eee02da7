#include "tune/fit.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "algorithms/registry.h"

namespace weft::tune {
namespace {

// One measured point as the cost formula sees it.
struct Row {
  double ca, cb, cg, t;
};

double predict(const Row& r, const algo::LinkCost& c) {
  return r.ca * c.alpha_s + r.cb * c.beta_s_per_byte + r.cg * c.gamma_s_per_byte;
}

// alpha, beta >= 0 minimizing sum(((predicted - t) / t)^2) with gamma fixed: the
// normal equations of the rows scaled by 1/t; if their solution has a negative
// component the optimum lies on a boundary, so the better one-parameter fit wins.
algo::LinkCost fit_rows(const std::vector<Row>& rows, double gamma) {
  double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  for (const Row& r : rows) {
    const double a = r.ca / r.t, b = r.cb / r.t, y = (r.t - r.cg * gamma) / r.t;
    s11 += a * a;
    s12 += a * b;
    s22 += b * b;
    s1y += a * y;
    s2y += b * y;
  }
  const double det = s11 * s22 - s12 * s12;
  if (det > 1e-30 * std::max(s11 * s22, 1e-300)) {
    const double alpha = (s1y * s22 - s2y * s12) / det;
    const double beta = (s2y * s11 - s1y * s12) / det;
    if (alpha >= 0 && beta >= 0) return {alpha, beta, gamma};
  }
  std::vector<algo::LinkCost> cands;
  if (s11 > 0) cands.push_back({std::max(s1y / s11, 0.0), 0.0, gamma});
  if (s22 > 0) cands.push_back({0.0, std::max(s2y / s22, 0.0), gamma});
  if (cands.empty()) return {0.0, 0.0, gamma};
  auto err = [&](const algo::LinkCost& c) {
    double e = 0;
    for (const Row& r : rows) e += std::pow((predict(r, c) - r.t) / r.t, 2);
    return e;
  };
  return *std::min_element(cands.begin(), cands.end(),
                           [&](const auto& x, const auto& y) { return err(x) < err(y); });
}

FittedEntry fitted(const Entry& e, bool generic, const std::vector<Row>& rows, double gamma) {
  FittedEntry f{e, generic, static_cast<int>(rows.size()), 0};
  f.entry.cost = fit_rows(rows, gamma);
  for (const Row& r : rows) f.worst_error = std::max(f.worst_error, std::fabs(predict(r, f.entry.cost) / r.t - 1));
  return f;
}

}  // namespace

Status fit_samples(const std::vector<Sample>& samples, const FitOptions& opt,
                   std::vector<FittedEntry>* out) {
  out->clear();
  // (nranks, algorithm) -> rows by size.
  std::map<std::pair<int, std::string>, std::vector<std::pair<uint64_t, Row>>> runs;
  for (const Sample& s : samples) {
    const algo::Algorithm* a = algo::find_algorithm(opt.coll, s.algo);
    if (a == nullptr || a->cost == nullptr)
      return Error(weftInvalidArgument, "calibration: no modelled %s algorithm '%s'",
                   sched::coll_name(opt.coll), s.algo.c_str());
    if (s.nranks < 1 || s.seconds <= 0 || s.bytes % opt.elem_size != 0)
      return Error(weftInvalidArgument,
                   "calibration: bad sample %s %d ranks %" PRIu64 " B %g s (element size %zu)",
                   s.algo.c_str(), s.nranks, s.bytes, s.seconds, opt.elem_size);
    sched::BuildArgs b{opt.coll, s.nranks, s.bytes / opt.elem_size, 0, opt.slice_bytes / opt.elem_size};
    b.local_size = opt.local_size == 0 ? s.nranks : opt.local_size;
    if (!algo::supports(*a, b))
      return Error(weftInvalidArgument, "calibration: %s cannot run %s of %" PRIu64 " B on %d ranks",
                   s.algo.c_str(), sched::coll_name(opt.coll), s.bytes, s.nranks);
    Row r{a->cost(b, opt.elem_size, {1, 0, 0}), a->cost(b, opt.elem_size, {0, 1, 0}),
          a->cost(b, opt.elem_size, {0, 0, 1}), s.seconds};
    runs[{s.nranks, s.algo}].push_back({s.bytes, r});
  }

  std::vector<Row> generic_rows;
  for (auto& [key, points] : runs) {
    const auto& [n, name] = key;
    std::sort(points.begin(), points.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    if (n == opt.generic_from)
      for (const auto& p : points) generic_rows.push_back(p.second);
    std::vector<uint64_t> bounds{0};
    bounds.insert(bounds.end(), opt.splits.begin(), opt.splits.end());
    std::vector<std::vector<Row>> seg(bounds.size());
    for (const auto& [bytes, r] : points)
      seg[static_cast<size_t>(std::upper_bound(bounds.begin(), bounds.end(), bytes) - bounds.begin()) - 1]
          .push_back(r);
    // A segment with fewer than two points (a line through one point says nothing)
    // shares the fit of its neighbour below, else above, and still gets its own line:
    // a file that leaves a boundary out would let the built-in entry there decide.
    std::vector<int> owner(bounds.size(), -1);
    for (size_t i = 0; i < bounds.size(); ++i) {
      for (size_t j = i + 1; j-- > 0 && owner[i] < 0;)
        if (seg[j].size() >= 2) owner[i] = static_cast<int>(j);
      for (size_t j = i + 1; j < bounds.size() && owner[i] < 0; ++j)
        if (seg[j].size() >= 2) owner[i] = static_cast<int>(j);
    }
    std::vector<FittedEntry> by_owner(bounds.size());
    for (size_t j = 0; j < bounds.size(); ++j) {
      if (seg[j].size() < 2) continue;
      std::vector<Row> rows;
      for (size_t i = 0; i < bounds.size(); ++i)
        if (owner[i] == static_cast<int>(j)) rows.insert(rows.end(), seg[i].begin(), seg[i].end());
      by_owner[j] = fitted(Entry{opt.cls, opt.coll, name, n, 0, {}}, false, rows, opt.gamma);
    }
    for (size_t i = 0; i < bounds.size(); ++i) {
      if (owner[i] < 0) continue;
      FittedEntry f = by_owner[static_cast<size_t>(owner[i])];
      f.entry.from_bytes = bounds[i];
      out->push_back(f);
      if (n == opt.generic_from) {
        f.entry.nranks = 0;
        out->push_back(f);
      }
    }
  }
  // The class's generic constants, for algorithms without their own entries: one fit
  // over all of them, so an unmeasured algorithm is judged on the measured scale
  // rather than looking free.
  if (!generic_rows.empty()) {
    Entry e{opt.cls, opt.coll, "*", 0, 0, {}};
    out->insert(out->begin(), fitted(e, true, generic_rows, opt.gamma));
  }
  return Status::Ok();
}

std::string format_fitted(const std::vector<FittedEntry>& fitted) {
  std::string s;
  char line[320];
  for (const FittedEntry& f : fitted) {
    const algo::LinkCost& c = f.entry.cost;
    if (f.generic)
      std::snprintf(line, sizeof(line), "%s * * 0 0 %.4g %.4g %.4g  # every algorithm, %d points, worst error %.0f%%\n",
                    link_class_name(f.entry.cls), c.alpha_s, c.beta_s_per_byte, c.gamma_s_per_byte,
                    f.points, f.worst_error * 100);
    else
      std::snprintf(line, sizeof(line), "%s  # %d points, worst error %.0f%%\n",
                    format_entry(f.entry).c_str(), f.points, f.worst_error * 100);
    s += line;
  }
  return s;
}

}  // namespace weft::tune
