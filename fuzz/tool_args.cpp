// weft-run's and weft-perf's command lines (NUL-separated arguments in the
// input; its first byte picks the tool): every combination parses to options or
// to one error line, never a crash.
#include <cstdint>
#include <string>
#include <vector>

#include "tools/weft-perf/args.h"
#include "tools/weft-run/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool perf = data[0] & 1;
  std::vector<std::string> args{perf ? "weft-perf" : "weft-run"};
  std::string cur;
  for (size_t i = 1; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  if (!cur.empty()) args.push_back(cur);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int argc = static_cast<int>(args.size());
  if (perf) {
    weftperf::PerfOptions opt;
    bool help = false;
    std::string error;
    if (weftperf::ParsePerfArgs(argc, argv.data(), &opt, &help, &error) && !help) {
      std::vector<size_t> sizes = weftperf::SizeSweep(opt);
      (void)sizes;
    } else if (!help && error.empty()) {
      __builtin_trap();
    }
  } else {
    weftrun::ParseResult r = weftrun::ParseArgs(argc, argv.data(), data[0] & 2 ? "12" : nullptr);
    if (r.outcome == weftrun::ParseOutcome::kError && r.error.empty() && !r.show_usage) __builtin_trap();
  }
  return 0;
}
