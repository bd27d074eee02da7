// The supervisor: starts the ranks, watches them, and ends them together.
#pragma once

#include "options.h"

namespace weftrun {

// Runs the job to completion and returns weft-run's exit status:
//   0 all ranks exited 0; the first failing rank's code (128+signal if killed);
//   124 --timeout fired; 128+signal when weft-run got SIGINT/SIGTERM/SIGHUP;
//   1 when weft-run itself could not set the job up.
// With --elastic a failing rank only is reported, and the job exits 0 when at
// least one rank exits 0 (and neither --timeout nor a signal ended it).
int RunJob(const Options& options);

}  // namespace weftrun
