// The measurement loop: for each datatype, op and size, out-of-place then in-place
// (where the collective has an in-place form):
// warm-up calls, a barrier, `iters` timed blocking calls, then (with -c 1) a checked
// call. With --device the calls are enqueued on the stream and the timed span
// ends when the stream has finished the last one. Times are the max over ranks, #wrong the sum, both reduced with weft itself.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "args.h"
#include "common/device_memory.h"
#include "collective.h"
#include "table.h"
#include "weft/weft.h"

namespace weftperf {

struct Job {
  weftComm_t comm = nullptr;
  int rank = 0;
  int nranks = 1;
  weft_tools::DeviceMemory* device = nullptr;  // --device
};

// Prints the error with weftGetLastError, aborts the communicator (which makes the
// other ranks fail fast instead of waiting out their deadline) and exits 1.
[[noreturn]] void DieOnApiError(const Job& job, const std::string& call, weftResult_t rc);

// Collectives over the job's communicator for the measurement loop itself (weft
// reduces its own timings; a failure ends the run through DieOnApiError).
void Barrier(const Job& job);
double MaxOverRanks(const Job& job, double v);
int64_t SumOverRanks(const Job& job, int64_t v);

// Online tuning (WEFT_TUNE_ONLINE) spends the first calls of each size class timing
// candidate algorithms; a benchmark wants the steady state, so after the warm-up
// calls it runs more (run()) until `comm` has settled row's size class.
bool Tuned(const Collective& coll, const RowSpec& row, weftComm_t comm);
void WarmUntilTuned(const Collective& coll, const RowSpec& row, weftComm_t comm, const std::function<void()>& run);

struct SweepResult {
  std::vector<Row> rows;  // filled on every rank; rank 0 prints them
  int64_t wrong_total = 0;
  double avg_busbw = 0;
};

// Runs the whole sweep; rank 0 prints each row as it completes.
SweepResult RunSweep(const Job& job, const Collective& coll, const PerfOptions& opt,
                     const Buffers& buffers);

}  // namespace weftperf
