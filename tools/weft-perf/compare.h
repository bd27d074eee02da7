// weft-perf <collective> -a all [--calibrate FILE]: every algorithm of the
// collective, and the tuner's automatic choice, measured in these same processes.
// Each algorithm runs on its own communicator forced through weftConfig_t.algo;
// "auto" is one more communicator with no forced choice (WEFT_ALGO and
// WEFT_TUNING_FILE as set).
//
// They are measured size by size, round-robin, kRounds times over (each round
// starting one contender later), and each point keeps its median: on a shared
// machine the speed drifts within minutes, and measuring one size's contenders
// seconds apart keeps that drift from deciding which is fastest (separate runs per
// algorithm disagreed by 2x). The table gives,
// per size, each algorithm's time, the fastest, auto's pick and auto's own time
// over the fastest's.
//
// --calibrate FILE then fits the tuner's constants to the forced times (src/tune/
// fit.h, in libweft) and rank 0 writes them to FILE for WEFT_TUNING_FILE; lines FILE
// already holds for other collectives, rank counts or link classes are kept, so one
// file collects several calibrations. The table gains the pick with the new file
// (the communicator's own Tuner class) and its time over the fastest (in sample).
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

// Returns the process exit status (0; 1 on wrong results or a file error; 2 when
// the collective has no algorithms to compare).
int RunAlgoComparison(const Job& job, const Collective& coll, const PerfOptions& opt,
                      const Buffers& buffers, const Placement& where);

}  // namespace weftperf
