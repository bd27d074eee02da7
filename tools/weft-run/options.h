// weft-run's command line: `weft-run -n N [--timeout S] [--tag-output] [--elastic] [--] CMD ARGS...`
#pragma once

#include <string>
#include <vector>

namespace weftrun {

inline constexpr int kMaxRanks = 1024;

struct Options {
  int nranks = 0;
  double timeout_s = 0;      // 0: no timeout
  std::string timeout_text;  // as the user wrote it, for the timeout message
  bool tag_output = false;
  bool elastic = false;  // a failed rank does not end the job (its survivors shrink)
  std::vector<std::string> command;  // CMD ARGS...
};

enum class ParseOutcome { kRun, kHelp, kError };

struct ParseResult {
  ParseOutcome outcome = ParseOutcome::kError;
  Options options;
  std::string error;  // for kError: one line, without the "weft-run: " prefix
  bool show_usage = false;  // kError: nothing to run was given, print the whole usage
};

// `timeout_env` is WEFT_RUN_TIMEOUT (nullptr when unset); --timeout overrides it.
ParseResult ParseArgs(int argc, char** argv, const char* timeout_env);

void PrintUsage(FILE* out);

}  // namespace weftrun
