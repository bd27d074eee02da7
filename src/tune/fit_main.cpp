// weft-tune-fit: fits tuning-table entries to measured times (tune/fit.h) and
// prints them in tuning-file syntax. scripts/calibrate feeds it the medians of
// scripts/bench-algorithms sweeps; `weft-perf --calibrate` calls the same fit
// in-process.
//
//   weft-tune-fit [--coll allreduce] [--class shm|net] [--elem-size 4]
//                 [--slice BYTES] [--split B1,B2,...] [--gamma S_PER_BYTE]
//                 [--generic-from NRANKS] < samples
//
// One sample per input line: "algorithm nranks bytes seconds" ('#' comments).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "tune/fit.h"

namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "weft-tune-fit: %s\nusage: weft-tune-fit [--coll C] [--class shm|net] [--elem-size B] "
               "[--slice B] [--split B1,B2] [--gamma G] [--generic-from N] < samples\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace weft;
  tune::FitOptions opt;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage(("missing value after " + flag).c_str());
    const std::string v = argv[++i];
    if (flag == "--coll") {
      if (!tune::parse_coll(v, &opt.coll)) return usage(("unknown collective " + v).c_str());
    } else if (flag == "--class") {
      if (v != "shm" && v != "net") return usage("--class is shm or net");
      opt.cls = v == "shm" ? tune::LinkClass::Shm : tune::LinkClass::Net;
    } else if (flag == "--elem-size") {
      opt.elem_size = std::strtoull(v.c_str(), nullptr, 10);
      if (opt.elem_size == 0) return usage("--elem-size must be positive");
    } else if (flag == "--slice") {
      opt.slice_bytes = std::strtoull(v.c_str(), nullptr, 10);
    } else if (flag == "--split") {
      std::istringstream in(v);
      for (std::string b; std::getline(in, b, ',');)
        if (!b.empty()) opt.splits.push_back(std::strtoull(b.c_str(), nullptr, 10));
    } else if (flag == "--gamma") {
      opt.gamma = std::strtod(v.c_str(), nullptr);
    } else if (flag == "--generic-from") {
      opt.generic_from = std::atoi(v.c_str());
    } else {
      return usage(("unknown flag " + flag).c_str());
    }
  }
  std::vector<tune::Sample> samples;
  int lineno = 0;
  for (std::string raw; std::getline(std::cin, raw);) {
    ++lineno;
    std::istringstream f(raw.substr(0, raw.find('#')));
    tune::Sample s;
    if (!(f >> s.algo)) continue;
    if (!(f >> s.nranks >> s.bytes >> s.seconds)) {
      std::fprintf(stderr, "weft-tune-fit: line %d: expected 'algorithm nranks bytes seconds', got '%s'\n",
                   lineno, raw.c_str());
      return 2;
    }
    samples.push_back(s);
  }
  std::vector<tune::FittedEntry> fitted;
  Status st = tune::fit_samples(samples, opt, &fitted);
  if (!st.ok()) {
    std::fprintf(stderr, "weft-tune-fit: %s\n", st.message().c_str());
    return 1;
  }
  std::fputs(tune::format_fitted(fitted).c_str(), stdout);
  return 0;
}
