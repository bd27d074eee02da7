// Chrome / Perfetto trace files (the JSON "traceEvents" format) of a training step.
#pragma once

#include <string>
#include <vector>

#include "train/dist/data_parallel.h"
#include "weft/weft.h"

namespace weft::train {

// Collective over comm (nullptr: one process): gathers every rank's events to rank
// 0, which writes them to path, one process per rank and one thread per track, with
// times in microseconds from the earliest event.
void writeChromeTrace(weftComm_t comm, const std::vector<TraceEvent>& events, const std::string& path);

}  // namespace weft::train
