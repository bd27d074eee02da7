#include "calibrate.h"

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

constexpr int kRounds = 3;              // measurements per (algorithm, size); median kept
constexpr double kBatchSeconds = 0.01;  // each measurement times calls worth ~10 ms
constexpr int kMaxBatch = 1000;
// Size segments of the fit: the shared-memory transport's protocol changes (eager
// FIFO up to WEFT_SHM_EAGER_MAX = 64 KiB, then in-place reads; pipelined slices past
// two WEFT_CHUNK_BYTES). The built-in defaults are fitted with the same ones.
const std::vector<uint64_t> kSplits{64u << 10, 2u << 20};
constexpr char kBlockTag[] = "# weft-perf --calibrate";

struct Point {
  RowSpec row;
  uint64_t bytes = 0;  // count * element size: what the tuner's table is keyed by
};

struct Forced {
  const weft::algo::Algorithm* algo = nullptr;
  weftComm_t comm = nullptr;
  std::vector<int> calls;                    // per point; 0: the algorithm cannot run it
  std::vector<std::vector<double>> seconds;  // per point, one per round
};

weft::sched::BuildArgs BuildArgsFor(weft::sched::Coll c, const Job& job, const Point& p,
                                    size_t esize, const Placement& where) {
  weft::sched::BuildArgs b{c, job.nranks, p.row.count, std::max(p.row.root, 0),
                           static_cast<uint64_t>(weft::params::CHUNK_BYTES()) / esize};
  b.local_size = where.local_size;
  return b;
}

// A communicator that runs only `choice` (WEFT_ALGO syntax); the id travels over
// the job's communicator.
weftComm_t OpenForced(const Job& job, const std::string& choice) {
  weftUniqueId id{};
  weftResult_t rc;
  if (job.rank == 0 && (rc = weftGetUniqueId(&id)) != weftSuccess) DieOnApiError(job, "weftGetUniqueId", rc);
  rc = weftBroadcast(&id, &id, sizeof(id), weftUint8, 0, job.comm, nullptr);
  if (rc != weftSuccess) DieOnApiError(job, "weftBroadcast (unique id)", rc);
  weftConfig_t config = WEFT_CONFIG_INITIALIZER;
  config.commName = "weft-perf-calibrate";
  config.algo = choice.c_str();
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

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
}

std::string Today() {
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

// Rank 0: fits, writes FILE, and prints the table with the new file's picks.
int FitAndWrite(const Job& job, weft::sched::Coll c, const PerfOptions& opt, const std::vector<Point>& points,
                const std::vector<Forced>& forced, size_t esize, const Placement& where) {
  const bool shm = where.local_ranks >= job.nranks;
  tune::FitOptions fo;
  fo.cls = shm ? tune::LinkClass::Shm : tune::LinkClass::Net;
  fo.coll = c;
  fo.elem_size = esize;
  fo.slice_bytes = static_cast<uint64_t>(weft::params::CHUNK_BYTES());
  fo.local_size = where.local_size;
  fo.splits = kSplits;
  std::vector<tune::Sample> samples;
  for (const Forced& f : forced)
    for (size_t i = 0; i < points.size(); ++i)
      if (f.calls[i] > 0) samples.push_back({f.algo->name, job.nranks, points[i].bytes, Median(f.seconds[i])});
  std::vector<tune::FittedEntry> fitted;
  weft::Status st = tune::fit_samples(samples, fo, &fitted);
  if (!st.ok() || fitted.empty()) {
    std::fprintf(stderr, "weft-perf: --calibrate: %s\n",
                 st.ok() ? "no algorithm ran at two or more sizes: nothing to fit" : st.message().c_str());
    return 1;
  }

  char key[160];
  std::snprintf(key, sizeof(key), "%s %s %d ranks %s", kBlockTag, weft::sched::coll_name(c), job.nranks,
                tune::link_class_name(fo.cls));
  std::string text = KeepOtherBlocks(opt.calibrate_path, key);
  if (text.empty())
    text = "# weft tuning file (WEFT_TUNING_FILE): class coll algo nranks from_bytes alpha_s "
           "beta_s_per_byte gamma_s_per_byte\n";
  text += std::string(key) + ": " + Info(points[0].row.type).name + " " + OpName(points[0].row.op) +
          ", median of " + std::to_string(kRounds) + " rounds, " + Today() + "\n";
  text += tune::format_fitted(fitted);
  tune::Table check;
  st = tune::parse_tuning_text(text, opt.calibrate_path, &check);
  std::string error = st.ok() ? "" : st.message();
  if (!st.ok() || !WriteFile(opt.calibrate_path, text, &error)) {
    std::fprintf(stderr, "weft-perf: --calibrate: %s\n", error.c_str());
    return 1;
  }

  // What the communicator's tuner now picks with this file, against the fastest.
  tune::Options to;
  to.tuning_file = opt.calibrate_path;
  to.log_table = false;
  std::unique_ptr<tune::Tuner> tuner;
  st = tune::Tuner::create(job.nranks, where.local_ranks, to, &tuner);
  if (!st.ok()) {
    std::fprintf(stderr, "weft-perf: --calibrate: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("#\n# %s: us per call (median of %d), fastest, and the tuner's pick with %s\n#%12s",
              key + 2, kRounds, opt.calibrate_path.c_str(), "size");
  for (const Forced& f : forced) std::printf(" %12.12s", f.algo->name);
  std::printf(" %12s %12s %8s\n", "fastest", "pick", "pick/best");
  int within = 0, rows = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    std::printf(" %12llu", static_cast<unsigned long long>(points[i].bytes));
    const Forced* best = nullptr;
    for (const Forced& f : forced) {
      if (f.calls[i] == 0) {
        std::printf(" %12s", "-");
        continue;
      }
      const double t = Median(f.seconds[i]);
      std::printf(" %12.2f", t * 1e6);
      if (best == nullptr || t < Median(best->seconds[i])) best = &f;
    }
    const weft::algo::Algorithm* pick = nullptr;
    st = tuner->choose(c, BuildArgsFor(c, job, points[i], esize, where), esize, &pick);
    const Forced* picked = nullptr;
    for (const Forced& f : forced)
      if (st.ok() && f.algo == pick && f.calls[i] > 0) picked = &f;
    if (best == nullptr || picked == nullptr) {
      std::printf(" %12s %12s %8s\n", best ? best->algo->name : "-", pick ? pick->name : "-", "-");
      continue;
    }
    const double ratio = Median(picked->seconds[i]) / Median(best->seconds[i]);
    ++rows;
    within += ratio <= 1.10 ? 1 : 0;
    std::printf(" %12s %12s %8.2f\n", best->algo->name, pick->name, ratio);
  }
  std::printf("#\n# fitted (written to %s):\n", opt.calibrate_path.c_str());
  std::istringstream lines(tune::format_fitted(fitted));
  for (std::string line; std::getline(lines, line);) std::printf("#   %s\n", line.c_str());
  std::printf("# in sample, the pick is within 10%% of the fastest at %d of %d sizes\n"
              "# use: WEFT_TUNING_FILE=%s on every rank\n",
              within, rows, opt.calibrate_path.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int RunCalibration(const Job& job, const Collective& coll, const PerfOptions& opt, const Buffers& buffers,
                   const Placement& where) {
  weft::sched::Coll c;
  if (!tune::parse_coll(coll.Name(), &c) || weft::algo::algorithms_for(c).empty()) {
    if (job.rank == 0) std::fprintf(stderr, "weft-perf: --calibrate: %s has no algorithms to choose from\n", coll.Name());
    return 2;
  }
  const size_t esize = Info(opt.types[0]).size;
  std::vector<Point> points;
  for (size_t bytes : SizeSweep(opt)) {
    Point p;
    p.row = {coll.CountForBytes(bytes, esize, job.nranks), opt.types[0], opt.ops[0],
             coll.HasRoot() ? opt.root : -1};
    p.bytes = p.row.count * esize;
    if (p.row.count > 0) points.push_back(p);
  }
  std::vector<Forced> forced;
  for (const weft::algo::Algorithm* a : weft::algo::algorithms_for(c)) {
    if (a->cost == nullptr) continue;
    Forced f;
    f.algo = a;
    for (const Point& p : points)
      f.calls.push_back(weft::algo::supports(*a, BuildArgsFor(c, job, p, esize, where)) ? 1 : 0);
    if (std::count(f.calls.begin(), f.calls.end(), 1) == 0) continue;
    f.comm = OpenForced(job, std::string(coll.Name()) + ":" + a->name);
    f.seconds.resize(points.size());
    forced.push_back(std::move(f));
  }
  if (job.rank == 0) {
    std::printf("# calibrating %zu algorithms x %zu sizes, %d rounds of ~%.0f ms batches\n", forced.size(),
                points.size(), kRounds, kBatchSeconds * 1e3);
    std::fflush(stdout);
  }
  // Warm up (plans are built on first use) and size each batch from one call.
  for (Forced& f : forced)
    for (size_t i = 0; i < points.size(); ++i) {
      if (f.calls[i] == 0) continue;
      for (int w = 0; w < std::max(opt.warmup, 1); ++w) TimeCalls(job, coll, buffers, points[i], f.comm, 1);
      const double one = TimeCalls(job, coll, buffers, points[i], f.comm, 1);
      f.calls[i] = static_cast<int>(std::clamp(std::ceil(kBatchSeconds / std::max(one, 1e-9)), 1.0,
                                               static_cast<double>(kMaxBatch)));
    }
  for (int r = 0; r < kRounds; ++r)
    for (Forced& f : forced)
      for (size_t i = 0; i < points.size(); ++i)
        if (f.calls[i] > 0) f.seconds[i].push_back(TimeCalls(job, coll, buffers, points[i], f.comm, f.calls[i]));

  // With -c 1, each algorithm's result at each size is checked once: a fit to a
  // wrong answer's timing would be worthless.
  int64_t wrong = 0;
  if (opt.check)
    for (Forced& f : forced)
      for (size_t i = 0; i < points.size(); ++i) {
        if (f.calls[i] == 0) continue;
        coll.FillInputs(buffers, false, points[i].row, job.rank, job.nranks);
        weftResult_t rc = coll.Run(buffers, false, points[i].row, f.comm);
        if (rc != weftSuccess) DieOnApiError(job, coll.Describe(points[i].row, false), rc);
        const int64_t w = SumOverRanks(job, coll.CountWrong(buffers, false, points[i].row, job.rank, job.nranks));
        if (w > 0 && job.rank == 0)
          std::printf("# %s %llu B: %lld wrong elements\n", f.algo->name,
                      static_cast<unsigned long long>(points[i].bytes), static_cast<long long>(w));
        wrong += w;
      }
  for (Forced& f : forced) {
    weftResult_t rc = weftCommDestroy(f.comm);
    if (rc != weftSuccess) DieOnApiError(job, "weftCommDestroy (calibration)", rc);
  }
  if (wrong > 0) {
    if (job.rank == 0) std::fprintf(stderr, "weft-perf: --calibrate: %lld wrong elements; no file written\n",
                                    static_cast<long long>(wrong));
    return 1;
  }
  return job.rank == 0 ? FitAndWrite(job, c, opt, points, forced, esize, where) : 0;
}

}  // namespace weftperf
