// weft-perf <collective> --calibrate FILE: measures every algorithm of the
// collective in these same processes (one communicator per algorithm, forced through
// weftConfig_t.algo), fits the tuner's constants to the times (src/tune/fit.h, in
// libweft), and rank 0 writes them to FILE as a tuning file for WEFT_TUNING_FILE.
// Lines FILE already holds for other collectives, rank counts or link classes are
// kept, so one file can collect several calibrations (e.g. 2 and 4 ranks).
//
// The algorithms are measured round-robin, kRounds times over, and each point keeps
// its median: on a shared machine the speed drifts within minutes, and interleaving
// spreads that drift over every algorithm instead of charging it to whichever ran
// during a slow spell. Then it prints, per size, each algorithm's time, the fastest,
// and what the tuner picks with the new file (the same Tuner the communicator uses).
#pragma once

#include <string>

#include "bench.h"
#include "collective.h"

namespace weftperf {

// Where the ranks are, as the tuner sees it (the communicator derives the same).
struct Placement {
  int local_ranks = 1;  // ranks on rank 0's host
  int local_size = 0;   // ranks per host if hosts hold equal consecutive blocks, else 0
};

// Returns the process exit status (0, or 1 on wrong results or a file error).
int RunCalibration(const Job& job, const Collective& coll, const PerfOptions& opt,
                   const Buffers& buffers, const Placement& where);

}  // namespace weftperf
