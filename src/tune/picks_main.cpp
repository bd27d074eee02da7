// weft-tune-picks: what the tuner picks for all-reduce calls of the given sizes, with
// the built-in table or a tuning file; for scripts/calibrate --evaluate, which checks
// a table's picks against measured sweeps without running them again.
//
//   weft-tune-picks [--file TUNING_FILE] [--elem-size 4] [--slice BYTES] NRANKS BYTES...
//
// prints "bytes algorithm predicted_seconds" per size (every rank on one host).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "tune/tuner.h"

int main(int argc, char** argv) {
  using namespace weft;
  tune::Options opt;
  opt.log_table = false;
  size_t esize = 4;
  uint64_t slice = 1 << 20;
  int i = 1;
  for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--file") opt.tuning_file = argv[i + 1];
    else if (flag == "--elem-size") esize = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--slice") slice = std::strtoull(argv[i + 1], nullptr, 10);
    else break;
  }
  if (i >= argc || esize == 0) {
    std::fprintf(stderr, "usage: weft-tune-picks [--file F] [--elem-size B] [--slice B] NRANKS BYTES...\n");
    return 2;
  }
  const int n = std::atoi(argv[i++]);
  std::unique_ptr<tune::Tuner> tuner;
  Status st = tune::Tuner::create(n, n, opt, &tuner);
  if (!st.ok()) {
    std::fprintf(stderr, "weft-tune-picks: %s\n", st.message().c_str());
    return 1;
  }
  for (; i < argc; ++i) {
    const uint64_t bytes = std::strtoull(argv[i], nullptr, 10);
    sched::BuildArgs b{sched::Coll::AllReduce, n, bytes / esize, 0, slice / esize};
    b.local_size = n;
    const algo::Algorithm* a = nullptr;
    st = tuner->choose(sched::Coll::AllReduce, b, esize, &a);
    if (!st.ok()) {
      std::fprintf(stderr, "weft-tune-picks: %s\n", st.message().c_str());
      return 1;
    }
    std::printf("%llu %s %.6g\n", static_cast<unsigned long long>(bytes), a->name, tuner->predict(*a, b, esize));
  }
  return 0;
}
