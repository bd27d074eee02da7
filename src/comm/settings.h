// The settings every rank of a communicator must share, because they change
// the schedules, the tuner's choices or the wire format: all-gathered at init so
// that a mismatch fails there, naming the setting and the ranks, instead of a
// size error or a hang at some later call.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "base/wait.h"
#include "bootstrap/bootstrap.h"
#include "tune/tuner.h"

namespace weft {

struct Setting {
  std::string name;   // as the user sets it: WEFT_CHUNK_BYTES, weftConfig_t.algo, ...
  std::string value;  // what is compared (a tuning file: its contents' hash)
};

// This rank's values, with the tuner options the communicator will use.
std::vector<Setting> shared_settings(const tune::Options& tuner);

// Every rank's settings compared with every other's: weftInvalidUsage naming the
// first setting that differs and which ranks hold which value.
Status agree_on_settings(boot::Bootstrap& boot, int nranks, const std::vector<Setting>& mine, Deadline deadline);

}  // namespace weft
