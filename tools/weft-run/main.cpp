// weft-run: the local launcher (a small mpirun/torchrun). See options.cpp for usage
// and job.cpp for how ranks are supervised.
#include <cstdio>
#include <cstdlib>

#include "job.h"
#include "options.h"

int main(int argc, char** argv) {
  using namespace weftrun;
  ParseResult parsed = ParseArgs(argc, argv, std::getenv("WEFT_RUN_TIMEOUT"));
  switch (parsed.outcome) {
    case ParseOutcome::kHelp:
      PrintUsage(stdout);
      return 0;
    case ParseOutcome::kError:
      std::fprintf(stderr, "weft-run: %s\n", parsed.error.c_str());
      // Full usage when nothing to run was given; a pointer to it for a typo.
      if (parsed.show_usage)
        PrintUsage(stderr);
      else
        std::fprintf(stderr, "weft-run: see 'weft-run --help'\n");
      return 2;
    case ParseOutcome::kRun:
      break;
  }
  return RunJob(parsed.options);
}
