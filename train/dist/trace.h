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
// tracks: the name of each track (TraceEvent::track), the data-parallel ones by default.
void writeChromeTrace(weftComm_t comm, const std::vector<TraceEvent>& events, const std::string& path,
                      const std::vector<std::string>& tracks = {"compute", "gradient buckets",
                                                                "parameter all-gathers"});

// Collective over comm: every rank's events, on rank 0 (one list per rank); empty on the others.
std::vector<std::vector<TraceEvent>> gatherTraceEvents(weftComm_t comm, const std::vector<TraceEvent>& events);

}  // namespace weft::train
