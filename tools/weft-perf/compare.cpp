#include "compare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "algorithms/registry.h"
#include "base/params.h"
#include "datatype.h"
#include "tune/fit.h"
#include "tune/tuner.h"

namespace weftperf {
namespace {

using Clock = std::chrono::steady_clock;
namespace tune = weft::tune;

constexpr double kBatchSeconds = 0.01;  // each measurement times calls worth ~10 ms
constexpr int kMaxBatch = 1000;
constexpr int kMaxRounds = 99;
constexpr double kNear = 1.10;          // "within 10% of the fastest"
// Size segments of the fit: the shared-memory transport's protocol changes (eager
// FIFO up to WEFT_SHM_EAGER_MAX = 64 KiB, then in-place reads; pipelined slices past
// two WEFT_CHUNK_BYTES). The built-in defaults are fitted with the same ones.
const std::vector<uint64_t> kSplits{64u << 10, 2u << 20};
constexpr char kBlockTag[] = "# weft-perf --calibrate";

struct Point {
  RowSpec row;
  uint64_t bytes = 0;  // count * element size: what the tuner's table is keyed by
};

// One communicator under test: a forced algorithm, or auto (algo == nullptr).
struct Contender {
  const weft::algo::Algorithm* algo = nullptr;
  weftComm_t comm = nullptr;
  std::vector<int> calls;                    // per point; 0: cannot run it
  std::vector<std::vector<double>> seconds;  // per point, one per round

  const char* name() const { return algo ? algo->name : "auto"; }
  bool ran(size_t i) const { return calls[i] > 0; }
  double median(size_t i) const {
    std::vector<double> v = seconds[i];
    std::sort(v.begin(), v.end());
    return (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
  }
};

weft::sched::BuildArgs BuildArgsFor(weft::sched::Coll c, const Job& job, const Point& p, size_t esize,
                                    const Placement& where) {
  weft::sched::BuildArgs b{c, job.nranks, p.row.count, std::max(p.row.root, 0),
                           static_cast<uint64_t>(weft::params::CHUNK_BYTES()) / esize};
  b.local_size = where.local_size;
  return b;
}

// A communicator that runs only `choice` (WEFT_ALGO syntax; empty: auto); the id
// travels over the job's communicator.
weftComm_t Open(const Job& job, const std::string& choice) {
  weftUniqueId id{};
  weftResult_t rc;
  if (job.rank == 0 && (rc = weftGetUniqueId(&id)) != weftSuccess) DieOnApiError(job, "weftGetUniqueId", rc);
  rc = weftBroadcast(&id, &id, sizeof(id), weftUint8, 0, job.comm, nullptr);
  if (rc != weftSuccess) DieOnApiError(job, "weftBroadcast (unique id)", rc);
  weftConfig_t config = WEFT_CONFIG_INITIALIZER;
  config.commName = "weft-perf-compare";
  if (!choice.empty()) config.algo = choice.c_str();
  weftComm_t comm = nullptr;
  rc = weftCommInitRankConfig(&comm, job.nranks, id, job.rank, &config);
  if (rc != weftSuccess) DieOnApiError(job, "weftCommInitRankConfig(algo " + choice + ")", rc);
  return comm;
}

// Seconds per call over `calls` calls, the slowest rank's.
double TimeCalls(const Job& job, const Collective& coll, const Buffers& b, const Point& p, weftComm_t comm,
                 int calls) {
  Barrier(job);
  Clock::time_point t0 = Clock::now();
  for (int i = 0; i < calls; ++i) {
    weftResult_t rc = coll.Run(b, false, p.row, comm);
    if (rc != weftSuccess) DieOnApiError(job, coll.Describe(p.row, false), rc);
  }
  return MaxOverRanks(job, std::chrono::duration<double>(Clock::now() - t0).count() / calls);
}

std::string Now() {
  char buf[32];
  std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", std::localtime(&now));
  return buf;
}

// FILE's text without the block an earlier calibration of the same (collective,
// rank count, link class) wrote; blocks start at kBlockTag lines.
std::string KeepOtherBlocks(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string kept, line;
  bool dropping = false;
  while (std::getline(in, line)) {
    if (line.rfind(kBlockTag, 0) == 0) dropping = line.compare(0, key.size(), key) == 0;
    if (!dropping) kept += line + "\n";
  }
  return kept;
}

bool WriteFile(const std::string& path, const std::string& text, std::string* error) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) {
      *error = "cannot write " + tmp;
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = "cannot rename " + tmp + " to " + path;
    return false;
  }
  return true;
}

// What the measurement gives rank 0 to report.
struct Results {
  weft::sched::Coll coll;
  size_t esize = 0;
  std::vector<Point> points;
  std::vector<Contender> forced;
  Contender automatic;
  std::vector<const weft::algo::Algorithm*> auto_picks;  // per point: what auto ran, once tuned
  int rounds = 3;   // measurements per (algorithm, size), interleaved; median kept ...
  bool more = false;  // ... or more at some sizes (--round-ms)
  std::string key;  // "# weft-perf --calibrate <coll> <n> ranks <class>"
  tune::LinkClass cls = tune::LinkClass::Shm;
};

// The fastest forced contender at point i, or nullptr if none ran it.
const Contender* Fastest(const Results& r, size_t i) {
  const Contender* best = nullptr;
  for (const Contender& f : r.forced)
    if (f.ran(i) && (best == nullptr || f.median(i) < best->median(i))) best = &f;
  return best;
}

const Contender* ForcedRun(const Results& r, const weft::algo::Algorithm* a, size_t i) {
  for (const Contender& f : r.forced)
    if (f.algo == a && f.ran(i)) return &f;
  return nullptr;
}

// The picks a tuner with options `to` makes at every point (nullptr where it fails).
bool Picks(const Job& job, const Results& r, const Placement& where, const tune::Options& to,
           std::vector<const weft::algo::Algorithm*>* out) {
  std::unique_ptr<tune::Tuner> tuner;
  tune::Options with_layout = to;
  if (where.local_size > 0) with_layout.layout = weft::sim::Fabric::host_blocks(job.nranks, where.local_size);
  weft::Status st = tune::Tuner::create(job.nranks, where.local_ranks, with_layout, &tuner);
  if (!st.ok()) {
    std::fprintf(stderr, "weft-perf: %s\n", st.message().c_str());
    return false;
  }
  out->assign(r.points.size(), nullptr);
  for (size_t i = 0; i < r.points.size(); ++i)
    if (!tuner->choose(r.coll, BuildArgsFor(r.coll, job, r.points[i], r.esize, where), r.esize, &(*out)[i]).ok())
      (*out)[i] = nullptr;
  return true;
}

// Rank 0, --calibrate: fits the forced times and writes FILE.
bool Calibrate(const Job& job, const PerfOptions& opt, const Results& r, const Placement& where,
               std::vector<tune::FittedEntry>* fitted) {
  tune::FitOptions fo;
  fo.cls = r.cls;
  fo.coll = r.coll;
  fo.elem_size = r.esize;
  fo.slice_bytes = static_cast<uint64_t>(weft::params::CHUNK_BYTES());
  fo.local_size = where.local_size;
  fo.splits = kSplits;
  std::vector<tune::Sample> samples;
  for (const Contender& f : r.forced)
    for (size_t i = 0; i < r.points.size(); ++i)
      if (f.ran(i)) samples.push_back({f.name(), job.nranks, r.points[i].bytes, f.median(i)});
  weft::Status st = tune::fit_samples(samples, fo, fitted);
  std::string error = !st.ok() ? st.message() : fitted->empty() ? "no algorithm ran at two or more sizes" : "";
  if (error.empty()) {
    std::string text = KeepOtherBlocks(opt.calibrate_path, r.key);
    if (text.empty())
      text = "# weft tuning file (WEFT_TUNING_FILE): class coll algo nranks from_bytes alpha_s "
             "beta_s_per_byte gamma_s_per_byte\n";
    text += r.key + ": " + Info(opt.types[0]).name + " " + OpName(opt.ops[0]) + ", median of " +
            std::to_string(r.rounds) + " rounds, " + Now() + "\n" + tune::format_fitted(*fitted);
    tune::Table parsed;
    st = tune::parse_tuning_text(text, opt.calibrate_path, &parsed);
    if (!st.ok()) error = st.message();
    else WriteFile(opt.calibrate_path, text, &error);
  }
  if (!error.empty()) std::fprintf(stderr, "weft-perf: --calibrate: %s\n", error.c_str());
  return error.empty();
}

void PrintTable(const PerfOptions& opt, const Results& r, const std::vector<const weft::algo::Algorithm*>& picks,
                const std::vector<const weft::algo::Algorithm*>& new_picks) {
  const bool calibrated = !new_picks.empty();
  std::printf("#\n# %s: us per call, median of %d%s interleaved rounds\n#%11s", r.key.c_str() + sizeof(kBlockTag),
              r.rounds, r.more ? " or more" : "", "size");
  for (const Contender& f : r.forced) std::printf(" %12.12s", f.name());
  std::printf(" %12s %12s %10s %9s", "fastest", "auto pick", "auto us", "auto/best");
  if (calibrated) std::printf(" %12s %9s", "new pick", "new/best");
  std::printf("\n");
  int auto_near = 0, new_near = 0, rows = 0;
  for (size_t i = 0; i < r.points.size(); ++i) {
    std::printf(" %11llu", static_cast<unsigned long long>(r.points[i].bytes));
    for (const Contender& f : r.forced)
      f.ran(i) ? std::printf(" %12.2f", f.median(i) * 1e6) : std::printf(" %12s", "-");
    const Contender* best = Fastest(r, i);
    if (best == nullptr) {
      std::printf("\n");
      continue;
    }
    ++rows;
    const double auto_ratio = r.automatic.median(i) / best->median(i);
    auto_near += auto_ratio <= kNear ? 1 : 0;
    std::printf(" %12s %12s %10.2f %9.2f", best->name(), picks[i] ? picks[i]->name : "-",
                r.automatic.median(i) * 1e6, auto_ratio);
    if (calibrated) {
      const Contender* f = ForcedRun(r, new_picks[i], i);
      if (f != nullptr) {
        new_near += f->median(i) / best->median(i) <= kNear ? 1 : 0;
        std::printf(" %12s %9.2f", f->name(), f->median(i) / best->median(i));
      } else {
        std::printf(" %12s %9s", "-", "-");
      }
    }
    std::printf("\n");
  }
  std::printf("# auto within 10%% of the fastest at %d of %d sizes\n", auto_near, rows);
  if (calibrated)
    std::printf("# with %s (in sample: fitted to these times), the pick's own time is within 10%% of the "
                "fastest at %d of %d sizes\n# use: WEFT_TUNING_FILE=%s on every rank\n",
                opt.calibrate_path.c_str(), new_near, rows, opt.calibrate_path.c_str());
}

bool WriteJson(const Job& job, const PerfOptions& opt, const Results& r,
               const std::vector<const weft::algo::Algorithm*>& picks) {
  std::ofstream out(opt.json_path, std::ios::trunc);
  out << "{\n \"collective\": \"" << weft::sched::coll_name(r.coll) << "\", \"nranks\": " << job.nranks
      << ", \"datatype\": \"" << Info(opt.types[0]).name << "\", \"op\": \"" << OpName(opt.ops[0])
      << "\", \"rounds\": " << r.rounds << ",\n \"points\": [";
  char num[32];
  auto us = [&](double s) {
    std::snprintf(num, sizeof(num), "%.3f", s * 1e6);
    return std::string(num);
  };
  for (size_t i = 0; i < r.points.size(); ++i) {
    out << (i ? "," : "") << "\n  {\"bytes\": " << r.points[i].bytes << ", \"count\": " << r.points[i].row.count
        << ", \"pick\": \"" << (picks[i] ? picks[i]->name : "") << "\", \"samples_us\": {";
    bool first = true;
    auto put = [&](const Contender& c) {
      if (!c.ran(i)) return;
      out << (first ? "" : ", ") << "\"" << c.name() << "\": [";
      for (size_t k = 0; k < c.seconds[i].size(); ++k) out << (k ? ", " : "") << us(c.seconds[i][k]);
      out << "]";
      first = false;
    };
    for (const Contender& f : r.forced) put(f);
    put(r.automatic);
    out << "}}";
  }
  out << "\n ]\n}\n";
  if (!out) std::fprintf(stderr, "weft-perf: cannot write %s\n", opt.json_path.c_str());
  return static_cast<bool>(out);
}

// Size by size: warm-up and batch sizing, then r.rounds rounds over every contender
// that can run the size (with --round-ms more, until the slowest contender's
// batches add up to that time), each round starting one contender later. Neighbouring
// measurements of one size are seconds apart, not a whole sweep, so drift barely
// separates the contenders, and the rotation keeps any one of them from always
// following the same other one.
void Measure(const Job& job, const Collective& coll, const PerfOptions& opt, const Buffers& buffers,
             Results* r) {
  std::vector<Contender*> all;
  for (Contender& f : r->forced) all.push_back(&f);
  all.push_back(&r->automatic);
  for (Contender* c : all) c->seconds.assign(r->points.size(), {});
  r->auto_picks.assign(r->points.size(), nullptr);
  for (size_t i = 0; i < r->points.size(); ++i) {
    const Point& p = r->points[i];
    double longest = 0;  // the slowest contender's batch, the same on every rank (agreed times)
    for (Contender* c : all) {
      if (!c->ran(i)) continue;
      for (int w = 0; w < std::max(opt.warmup, 1); ++w) TimeCalls(job, coll, buffers, p, c->comm, 1);
      WarmUntilTuned(coll, p.row, c->comm, [&] {
        weftResult_t rc = coll.Run(buffers, false, p.row, c->comm);
        if (rc != weftSuccess) DieOnApiError(job, coll.Describe(p.row, false), rc);
      });
      const char* name = nullptr;
      if (c == &r->automatic &&
          weftCommGetAlgorithm(c->comm, coll.Name(), p.row.count, p.row.type, std::max(p.row.root, 0), &name,
                               nullptr) == weftSuccess)
        r->auto_picks[i] = weft::algo::find_algorithm(r->coll, name);
      const double one = TimeCalls(job, coll, buffers, p, c->comm, 1);
      c->calls[i] = static_cast<int>(
          std::clamp(std::ceil(kBatchSeconds / std::max(one, 1e-9)), 1.0, static_cast<double>(kMaxBatch)));
      longest = std::max(longest, one * c->calls[i]);
    }
    int rounds = r->rounds;
    if (opt.round_ms > 0 && longest > 0)
      rounds = static_cast<int>(std::clamp(std::ceil(opt.round_ms * 1e-3 / longest), static_cast<double>(r->rounds),
                                           static_cast<double>(kMaxRounds)));
    for (int round = 0; round < rounds; ++round)
      for (size_t k = 0; k < all.size(); ++k) {
        Contender* c = all[(k + static_cast<size_t>(round)) % all.size()];
        if (c->ran(i)) c->seconds[i].push_back(TimeCalls(job, coll, buffers, p, c->comm, c->calls[i]));
      }
  }
}

// With -c 1, every contender's result at every size once: a time of a wrong answer
// is worth nothing.
int64_t CheckAll(const Job& job, const Collective& coll, const Buffers& buffers, const Results& r) {
  int64_t wrong = 0;
  std::vector<const Contender*> all;
  for (const Contender& f : r.forced) all.push_back(&f);
  all.push_back(&r.automatic);
  for (const Contender* c : all)
    for (size_t i = 0; i < r.points.size(); ++i) {
      if (!c->ran(i)) continue;
      const RowSpec& row = r.points[i].row;
      coll.FillInputs(buffers, false, row, job.rank, job.nranks);
      weftResult_t rc = coll.Run(buffers, false, row, c->comm);
      if (rc != weftSuccess) DieOnApiError(job, coll.Describe(row, false), rc);
      const int64_t w = SumOverRanks(job, coll.CountWrong(buffers, false, row, job.rank, job.nranks));
      if (w > 0 && job.rank == 0)
        std::printf("# %s %llu B: %lld wrong elements\n", c->name(),
                    static_cast<unsigned long long>(r.points[i].bytes), static_cast<long long>(w));
      wrong += w;
    }
  return wrong;
}

}  // namespace

int RunAlgoComparison(const Job& job, const Collective& coll, const PerfOptions& opt, const Buffers& buffers,
                      const Placement& where) {
  Results r;
  if (!tune::parse_coll(coll.Name(), &r.coll) || weft::algo::algorithms_for(r.coll).empty()) {
    if (job.rank == 0) std::fprintf(stderr, "weft-perf: -a all: %s has no algorithms to choose from\n", coll.Name());
    return 2;
  }
  r.esize = Info(opt.types[0]).size;
  r.rounds = opt.rounds;
  r.more = opt.round_ms > 0;
  r.cls = where.local_ranks >= job.nranks ? tune::LinkClass::Shm : tune::LinkClass::Net;
  r.key = std::string(kBlockTag) + " " + weft::sched::coll_name(r.coll) + " " + std::to_string(job.nranks) +
          " ranks " + tune::link_class_name(r.cls);
  for (size_t bytes : SizeSweep(opt)) {
    Point p;
    p.row = {coll.CountForBytes(bytes, r.esize, job.nranks), opt.types[0], opt.ops[0],
             coll.HasRoot() ? opt.root : -1};
    p.bytes = p.row.count * r.esize;
    if (p.row.count > 0) r.points.push_back(p);
  }
  for (const weft::algo::Algorithm* a : weft::algo::algorithms_for(r.coll)) {
    if (a->cost == nullptr) continue;
    Contender f;
    f.algo = a;
    for (const Point& p : r.points)
      f.calls.push_back(weft::algo::supports(*a, BuildArgsFor(r.coll, job, p, r.esize, where)) ? 1 : 0);
    if (std::count(f.calls.begin(), f.calls.end(), 1) == 0) continue;
    f.comm = Open(job, std::string(coll.Name()) + ":" + a->name);
    r.forced.push_back(std::move(f));
  }
  r.automatic.calls.assign(r.points.size(), 1);
  r.automatic.comm = Open(job, "");
  if (job.rank == 0) {
    std::printf("# %zu algorithms and auto x %zu sizes, %d%s interleaved rounds of ~%.0f ms batches\n",
                r.forced.size(), r.points.size(), r.rounds,
                r.more ? (" or more (until each has been timed for " + std::to_string(opt.round_ms) + " ms)").c_str() : "",
                kBatchSeconds * 1e3);
    std::fflush(stdout);
  }
  Measure(job, coll, opt, buffers, &r);
  const int64_t wrong = opt.check ? CheckAll(job, coll, buffers, r) : 0;
  auto destroy = [&](Contender& c) {
    weftResult_t rc = weftCommDestroy(c.comm);
    if (rc != weftSuccess) DieOnApiError(job, std::string("weftCommDestroy (") + c.name() + ")", rc);
  };
  for (Contender& c : r.forced) destroy(c);
  destroy(r.automatic);
  if (wrong > 0) {
    if (job.rank == 0)
      std::fprintf(stderr, "weft-perf: -a all: %lld wrong elements%s\n", static_cast<long long>(wrong),
                   opt.calibrate_path.empty() ? "" : "; no tuning file written");
    return 1;
  }
  if (job.rank != 0) return 0;

  std::vector<const weft::algo::Algorithm*> new_picks;
  std::vector<tune::FittedEntry> fitted;
  if (!opt.calibrate_path.empty()) {
    if (!Calibrate(job, opt, r, where, &fitted)) return 1;
    // The file's model alone: what the tuner starts measuring from (and all it
    // uses with WEFT_TUNE_ONLINE=0).
    tune::Options to;
    to.tuning_file = opt.calibrate_path;
    to.log_table = false;
    if (!Picks(job, r, where, to, &new_picks)) return 1;
  }
  PrintTable(opt, r, r.auto_picks, new_picks);
  if (!fitted.empty()) {
    std::printf("#\n# fitted, written to %s:\n", opt.calibrate_path.c_str());
    std::istringstream lines(tune::format_fitted(fitted));
    for (std::string line; std::getline(lines, line);) std::printf("#   %s\n", line.c_str());
  }
  std::fflush(stdout);
  return opt.json_path.empty() || WriteJson(job, opt, r, r.auto_picks) ? 0 : 1;
}

}  // namespace weftperf
