// Calibration: tuning-table entries fitted to measured times.
//
// Every algorithm's cost() is linear in (alpha, beta, gamma): cost = c_a alpha +
// c_b beta + c_g gamma, with the coefficients obtained by calling cost() with unit
// constants. So fitting the constants to measured times is linear least squares over
// those coefficients, and the formulas stay in one place (beside the builders).
//
// Per (algorithm, rank count, size segment) alpha and beta are fitted on relative
// error; gamma is fixed, because per algorithm the beta and gamma terms are both
// proportional to the message size and cannot be told apart. Segments follow the
// transport's protocol changes (eager FIFO, in-place reads, pipelined slices), which
// one straight line through all sizes would average away.
//
// Used by `weft-perf --calibrate` (times measured in the same processes) and by
// weft-tune-fit (times from scripts/bench-algorithms JSON, via scripts/calibrate).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sched/schedule.h"
#include "tune/table.h"

namespace weft::tune {

struct Sample {
  std::string algo;
  int nranks = 0;
  uint64_t bytes = 0;  // count * elem_size
  double seconds = 0;  // one call
};

struct FitOptions {
  LinkClass cls = LinkClass::Shm;
  sched::Coll coll = sched::Coll::AllReduce;
  size_t elem_size = 4;
  uint64_t slice_bytes = 1 << 20;  // WEFT_CHUNK_BYTES the samples were taken with
  // Ranks per host as the communicator sees it (BuildArgs::local_size); 0: every
  // rank on one host.
  int local_size = 0;
  std::vector<uint64_t> splits;  // segment boundaries in bytes, ascending
  double gamma = 1.0e-10;        // reduction seconds per byte, fixed
  // Also write this rank count's entries as nranks 0 (any rank count without its
  // own) and fit the class's generic constants over all its algorithms; 0: neither.
  int generic_from = 0;
};

struct FittedEntry {
  Entry entry;
  bool generic = false;  // the class's "* * 0 0" constants rather than an entry
  int points = 0;
  double worst_error = 0;  // max |predicted / measured - 1| over the points
};

// Entries for every (algorithm, nranks, segment) of an algorithm with at least two
// samples at that rank count, in (nranks, algorithm, segment) order; the generic
// line first when asked for. A segment with fewer than two samples gets the fit of
// its neighbour below (else above), fitted with its samples included.
// Samples of algorithms unknown for opt.coll or that cannot run their call are an
// error, so a typo in the input does not silently vanish from the fit.
Status fit_samples(const std::vector<Sample>& samples, const FitOptions& opt,
                   std::vector<FittedEntry>* out);

// Tuning-file lines, each with its point count and worst error as a comment.
std::string format_fitted(const std::vector<FittedEntry>& fitted);

}  // namespace weft::tune
