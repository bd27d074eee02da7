#include "args.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "collective.h"
#include "datatype.h"

namespace weftperf {
namespace {

bool ParseInt(const std::string& text, long min, long max, long* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

}  // namespace

bool ParseBytes(const std::string& text, size_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || text[0] == '-') return false;
  unsigned shift = 0;
  switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    default: return false;
  }
  if (*end != '\0') return false;
  if (shift != 0 && v > (~0ull >> shift)) return false;
  *out = static_cast<size_t>(v << shift);
  return true;
}

void PrintPerfUsage(FILE* out) {
  std::fprintf(out,
      "usage: weft-perf <collective> [options]     (run under weft-run, torchrun, mpirun)\n"
      "collectives: %s\n"
      "  -b, --minbytes N     smallest size, bytes; K/M/G suffixes (default 32M)\n"
      "  -e, --maxbytes N     largest size (default 32M)\n"
      "  -f, --stepfactor F   multiply the size by F each step\n"
      "  -i, --stepbytes N    add N bytes each step when no -f (default 1M)\n"
      "  -n, --iters N        timed iterations per size (default 20)\n"
      "  -w, --warmup_iters N untimed iterations first (default 5)\n"
      "  -c, --check 0/1      verify every element on every rank (default 1)\n"
      "  -d, --datatype T     int8 uint8 int32 uint32 int64 uint64 half float double\n"
      "                       bfloat16 f8e4m3 f8e5m2, or all (default float)\n"
      "  -o, --op OP          sum prod max min avg, or all (default sum)\n"
      "  -r, --root N         root rank of broadcast and reduce (default 0)\n"
      "  -a, --algo NAME      force an algorithm (sets WEFT_ALGO); 'all': every algorithm\n"
      "                       and auto, interleaved in these processes (rounds of ~10 ms\n"
      "                       batches; -n is not used), one row per size; --json writes\n"
      "                       every sample\n"
      "      --rounds N       -a all: rounds per (algorithm, size), each point the median\n"
      "                       (default 3; more for a noisy machine)\n"
      "      --round-ms MS    -a all: at each size more rounds, up to 99, until every\n"
      "                       algorithm has been timed for about MS ms (default 0: none)\n"
      "      --memalloc       buffers from weftMemAlloc instead of malloc\n"
      "      --device cuda    buffers in GPU memory, each call enqueued on a CUDA stream\n"
      "                       and timed to the stream's end; the header gives the\n"
      "                       device-to-device and pinned host<->device copy bandwidth\n"
      "                       measured first (cuda: the driver libcuda.so.1; a path:\n"
      "                       that driver library); online tuning off unless\n"
      "                       WEFT_TUNE_ONLINE is set\n"
      "      --window         with --device: the buffers are symmetric windows\n"
      "                       (weftCommWindowRegister), which cuda_p2p reads in place\n"
      "      --graph          with --device: the -n timed calls of a size are captured\n"
      "                       into one CUDA graph, which is launched once untimed and\n"
      "                       then timed (nccl-tests' -G 1; collectives over cuda_p2p)\n"
      "      --explain        rank 0 prints each size's candidates with their predicted\n"
      "                       latency, bandwidth and reduction terms, the pick, and the\n"
      "                       times online tuning measured (sets WEFT_EXPLAIN=1)\n"
      "      --json FILE      also write rank 0's rows as JSON\n"
      "      --csv FILE       also write rank 0's rows as CSV\n"
      "      --calibrate FILE -a all, then fit the tuner's constants to the times and\n"
      "                       write them to FILE for WEFT_TUNING_FILE (keeps FILE's\n"
      "                       lines for other collectives and rank counts)\n"
      "  -h, --help           this text\n",
      CollectiveNames());
}

bool ParsePerfArgs(int argc, char** argv, PerfOptions* opt, bool* help, std::string* error) {
  *help = false;
  if (argc < 2) {
    *error = "missing collective";
    return false;
  }
  opt->collective = argv[1];
  if (opt->collective == "-h" || opt->collective == "--help") {
    *help = true;
    return true;
  }
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      *help = true;
      return true;
    }
    if (a == "--memalloc") {
      opt->memalloc = true;
      continue;
    }
    if (a == "--explain") {
      opt->explain = true;
      continue;
    }
    if (a == "--window") {
      opt->window = true;
      continue;
    }
    if (a == "--graph") {
      opt->graph = true;
      continue;
    }
    // Every other option takes a value: "-b 8", "-b8" or "--minbytes=8".
    std::string name = a, value;
    bool have_value = false;
    if (a.rfind("--", 0) == 0) {
      size_t eq = a.find('=');
      if (eq != std::string::npos) {
        name = a.substr(0, eq);
        value = a.substr(eq + 1);
        have_value = true;
      }
    } else if (a.size() > 2 && a[0] == '-') {
      name = a.substr(0, 2);
      value = a.substr(2);
      have_value = true;
    }
    if (!have_value) {
      if (i + 1 >= argc) {
        *error = a + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    long v = 0;
    bool ok = true;
    if (name == "-b" || name == "--minbytes") {
      ok = ParseBytes(value, &opt->min_bytes);
    } else if (name == "-e" || name == "--maxbytes") {
      ok = ParseBytes(value, &opt->max_bytes);
    } else if (name == "-f" || name == "--stepfactor") {
      ok = ParseInt(value, 1, 1 << 20, &v);
      opt->step_factor = static_cast<size_t>(v);
    } else if (name == "-i" || name == "--stepbytes") {
      ok = ParseBytes(value, &opt->step_bytes);
    } else if (name == "-n" || name == "--iters") {
      ok = ParseInt(value, 1, 1 << 30, &v);
      opt->iters = static_cast<int>(v);
    } else if (name == "-w" || name == "--warmup_iters") {
      ok = ParseInt(value, 0, 1 << 30, &v);
      opt->warmup = static_cast<int>(v);
    } else if (name == "-c" || name == "--check") {
      ok = ParseInt(value, 0, 1, &v);
      opt->check = v != 0;
    } else if (name == "-d" || name == "--datatype") {
      ok = ParseTypes(value, &opt->types);
    } else if (name == "-o" || name == "--op") {
      ok = ParseOps(value, &opt->ops);
    } else if (name == "-r" || name == "--root") {
      ok = ParseInt(value, 0, 1 << 30, &v);
      opt->root = static_cast<int>(v);
    } else if (name == "-a" || name == "--algo") {
      opt->algo = value;
    } else if (name == "--device") {
      opt->device = value == "cuda" ? "libcuda.so.1" : value;
    } else if (name == "--rounds") {
      ok = ParseInt(value, 1, 99, &v);
      opt->rounds = static_cast<int>(v);
    } else if (name == "--round-ms") {
      ok = ParseInt(value, 0, 1000000, &v);
      opt->round_ms = static_cast<int>(v);
    } else if (name == "--json") {
      opt->json_path = value;
    } else if (name == "--csv") {
      opt->csv_path = value;
    } else if (name == "--calibrate") {
      opt->calibrate_path = value;
      ok = !value.empty();
    } else {
      *error = "unknown option '" + a + "'";
      return false;
    }
    if (!ok) {
      *error = "bad value '" + value + "' for " + name;
      return false;
    }
  }
  if (!opt->device.empty() && (opt->algo == "all" || !opt->calibrate_path.empty() || opt->memalloc)) {
    *error = "--device runs the table of one collective on device memory: no -a all, --calibrate or --memalloc";
    return false;
  }
  if (opt->graph && opt->device.empty()) {
    *error = "--graph captures calls on a CUDA stream: it needs --device";
    return false;
  }
  if (opt->window && opt->device.empty()) {
    *error = "--window registers device buffers: it needs --device";
    return false;
  }
  if (opt->min_bytes > opt->max_bytes) {
    *error = "-b (minbytes) is larger than -e (maxbytes)";
    return false;
  }
  if (!opt->calibrate_path.empty()) {
    if (!opt->algo.empty() && opt->algo != "all") {
      *error = "--calibrate times every algorithm (-a all); it takes no other -a";
      return false;
    }
    if (opt->min_bytes == opt->max_bytes) {
      *error = "--calibrate fits lines through several sizes: give a sweep, e.g. -b 8 -e 256M -f 4";
      return false;
    }
    opt->algo = "all";
  }
  if ((opt->rounds != 3 || opt->round_ms != 0) && opt->algo != "all") {
    *error = "--rounds and --round-ms are for -a all (and --calibrate)";
    return false;
  }
  if (opt->algo == "all" && (opt->types.size() != 1 || opt->ops.size() != 1 || !opt->csv_path.empty())) {
    *error = "-a all compares algorithms at one datatype and op (no -d all, -o all) and writes no --csv";
    return false;
  }
  if (opt->step_factor <= 1 && opt->step_bytes == 0 && opt->min_bytes != opt->max_bytes) {
    *error = "-i 0 without -f would never reach maxbytes";
    return false;
  }
  // A sweep by -i of a small step over a large range would run for days (and the
  // list of sizes alone took gigabytes; found by fuzz_tool_args).
  if (opt->step_factor <= 1 && opt->step_bytes > 0 &&
      (opt->max_bytes - opt->min_bytes) / opt->step_bytes >= kMaxSweepSizes) {
    *error = "-b " + std::to_string(opt->min_bytes) + " -e " + std::to_string(opt->max_bytes) + " -i " +
             std::to_string(opt->step_bytes) + " gives more than " + std::to_string(kMaxSweepSizes) +
             " sizes; use a larger -i or -f";
    return false;
  }
  return true;
}

std::vector<size_t> SizeSweep(const PerfOptions& opt) {
  std::vector<size_t> sizes;
  size_t s = opt.min_bytes;
  while (s <= opt.max_bytes) {
    sizes.push_back(s);
    // A size of 0 never grows by a factor; overflow would wrap. Either ends the sweep.
    if (opt.step_factor > 1 && s > SIZE_MAX / opt.step_factor) break;
    size_t next = opt.step_factor > 1 ? s * opt.step_factor : s + opt.step_bytes;
    if (next <= s) break;
    s = next;
  }
  return sizes;
}

}  // namespace weftperf
