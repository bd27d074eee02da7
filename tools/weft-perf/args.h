// weft-perf's command line, nccl-tests' flags with nccl-tests' meanings:
//   weft-perf <collective> [-b minbytes] [-e maxbytes] [-f stepfactor] [-i stepbytes]
//             [-n iters] [-w warmup_iters] [-c 0/1] [-d dtype] [-o op] [-r root] [-a algo]
//             [--memalloc] [--device cuda [--window] [--graph]] [--explain] [--json FILE] [--csv FILE]
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace weftperf {

struct PerfOptions {
  std::string collective;  // "allreduce", ...
  size_t min_bytes = 32u << 20;
  size_t max_bytes = 32u << 20;
  size_t step_factor = 1;  // > 1: sizes grow by this factor; else by step_bytes
  size_t step_bytes = 1u << 20;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  std::vector<weftDataType_t> types{weftFloat32};
  std::vector<weftRedOp_t> ops{weftSum};
  int root = 0;  // -r: broadcast and reduce; checked against the rank count after init
  std::string algo;  // -a: exported as WEFT_ALGO before init
  bool memalloc = false;
  std::string device;  // --device: the CUDA driver library to load ("cuda": libcuda.so.1)
  bool window = false;   // --window: the device buffers are symmetric windows
  bool graph = false;    // --graph: the timed calls captured into one CUDA graph
  bool explain = false;  // --explain: WEFT_EXPLAIN=1
  int rounds = 3;  // --rounds: -a all's interleaved measurements per (algorithm, size) ...
  int round_ms = 0;  // --round-ms: ... or more, up to 99, until each has measured this long
  std::string json_path;
  std::string csv_path;
  std::string calibrate_path;  // --calibrate: fit the tuner instead of the sweep table
};

// "8", "64K", "1M", "2G" (binary multiples, either case).
bool ParseBytes(const std::string& text, size_t* out);

// The most sizes one sweep may have (-b, -e, -i).
inline constexpr size_t kMaxSweepSizes = size_t{1} << 16;

// Returns false and sets *error on bad input; *help when -h was given.
bool ParsePerfArgs(int argc, char** argv, PerfOptions* opt, bool* help, std::string* error);

// The sizes to run, in bytes, from the -b/-e/-f/-i options.
std::vector<size_t> SizeSweep(const PerfOptions& opt);

void PrintPerfUsage(FILE* out);

}  // namespace weftperf
