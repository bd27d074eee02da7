#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weftrun {
namespace {

bool ParseRankCount(const char* text, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 1 || v > kMaxRanks) return false;
  *out = static_cast<int>(v);
  return true;
}

// Seconds, possibly fractional ("1", "2.5"); must be positive and finite.
bool ParseSeconds(const char* text, double* out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !std::isfinite(v) || v <= 0) return false;
  *out = v;
  return true;
}

ParseResult Fail(std::string msg) {
  ParseResult r;
  r.outcome = ParseOutcome::kError;
  r.error = std::move(msg);
  return r;
}

}  // namespace

void PrintUsage(FILE* out) {
  std::fprintf(out,
      "usage: weft-run -n N [--timeout S] [--tag-output] [--elastic] [--] CMD [ARGS...]\n"
      "\n"
      "Runs N local ranks of CMD with WEFT_RANK, WEFT_NRANKS, WEFT_LOCAL_RANK,\n"
      "WEFT_LOCAL_SIZE, WEFT_COMM_ID and WEFT_JOB_SECRET set.\n"
      "\n"
      "  -n N            number of ranks, 1..%d\n"
      "  --timeout S     end the job after S seconds, exit 124 (env WEFT_RUN_TIMEOUT)\n"
      "  --tag-output    prefix every line of a rank's stdout/stderr with [rank]\n"
      "  --elastic       a failing rank does not end the job: the others go on\n"
      "                  (weftCommShrink, weft-train --elastic)\n"
      "  -h, --help      this text\n"
      "\n"
      "If a rank fails (non-zero exit or a signal) the others get SIGTERM, then SIGKILL\n"
      "after a grace period, and weft-run exits with the first failing rank's code\n"
      "(128+signal for a signal). With --elastic failures are reported and the job\n"
      "runs on; it exits 0 if at least one rank exits 0, else with the first failing\n"
      "rank's code. SIGINT, SIGTERM and SIGHUP are forwarded to every rank.\n",
      kMaxRanks);
}

ParseResult ParseArgs(int argc, char** argv, const char* timeout_env) {
  ParseResult r;
  Options& o = r.options;
  if (timeout_env != nullptr && *timeout_env != '\0') {
    if (!ParseSeconds(timeout_env, &o.timeout_s))
      return Fail(std::string("WEFT_RUN_TIMEOUT must be a positive number of seconds, not '") +
                  timeout_env + "'");
    o.timeout_text = timeout_env;
  }
  bool have_n = false;
  int i = 1;
  // Options stop at the first word that is not one, so CMD's own flags pass through.
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") {
      r.outcome = ParseOutcome::kHelp;
      return r;
    }
    if (a == "-n" || a == "--np" || a.rfind("-n", 0) == 0 || a.rfind("--np=", 0) == 0) {
      const char* value = nullptr;
      if (a == "-n" || a == "--np") {
        if (i + 1 >= argc) return Fail(a + " needs a value");
        value = argv[++i];
      } else if (a.rfind("--np=", 0) == 0) {
        value = argv[i] + 5;
      } else {
        value = argv[i] + 2;  // -n4
      }
      if (!ParseRankCount(value, &o.nranks))
        return Fail(std::string("-n must be an integer in 1..") + std::to_string(kMaxRanks) +
                    ", not '" + value + "'");
      have_n = true;
      continue;
    }
    if (a == "--timeout" || a.rfind("--timeout=", 0) == 0) {
      const char* value = nullptr;
      if (a == "--timeout") {
        if (i + 1 >= argc) return Fail("--timeout needs a value");
        value = argv[++i];
      } else {
        value = argv[i] + 10;
      }
      if (!ParseSeconds(value, &o.timeout_s))
        return Fail(std::string("--timeout must be a positive number of seconds, not '") +
                    value + "'");
      o.timeout_text = value;
      continue;
    }
    if (a == "--tag-output") {
      o.tag_output = true;
      continue;
    }
    if (a == "--elastic") {
      o.elastic = true;
      continue;
    }
    if (a.size() > 1 && a[0] == '-') return Fail("unknown option '" + a + "'");
    break;  // CMD
  }
  for (; i < argc; ++i) o.command.emplace_back(argv[i]);
  if (o.command.empty() || !have_n) {
    ParseResult bad = Fail(o.command.empty() ? "missing command" : "missing -n N");
    bad.show_usage = true;
    return bad;
  }
  r.outcome = ParseOutcome::kRun;
  return r;
}

}  // namespace weftrun
