// weft-tune-coeffs: the cost formulas' coefficients, for scripts/calibrate.
//
//   weft-tune-coeffs COLL NRANKS ELEM_SIZE SLICE_BYTES COUNT...
//
// prints "algo count c_alpha c_beta c_gamma" per (registered algorithm that
// supports the call, count): every cost() is linear in (alpha, beta, gamma), so
// cost = c_alpha*alpha + c_beta*beta + c_gamma*gamma, and fitting constants to
// measured times is linear least squares over these rows. The formulas stay in
// one place (the builders' cost functions); the script never re-types them.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "algorithms/registry.h"
#include "tune/table.h"

int main(int argc, char** argv) {
  using namespace weft;
  sched::Coll coll;
  if (argc < 6 || !tune::parse_coll(argv[1], &coll)) {
    std::fprintf(stderr, "usage: weft-tune-coeffs COLL NRANKS ELEM_SIZE SLICE_BYTES COUNT...\n");
    return 2;
  }
  const int n = std::atoi(argv[2]);
  const size_t esize = std::strtoull(argv[3], nullptr, 10);
  const uint64_t slice = std::strtoull(argv[4], nullptr, 10) / (esize ? esize : 1);
  for (int i = 5; i < argc; ++i) {
    const uint64_t count = std::strtoull(argv[i], nullptr, 10);
    sched::BuildArgs b{coll, n, count, 0, slice};
    for (const algo::Algorithm* a : algo::algorithms_for(coll)) {
      if (a->cost == nullptr || !algo::supports(*a, b)) continue;
      std::printf("%s %llu %.9g %.9g %.9g\n", a->name, static_cast<unsigned long long>(count),
                  a->cost(b, esize, {1, 0, 0}), a->cost(b, esize, {0, 1, 0}), a->cost(b, esize, {0, 0, 1}));
    }
  }
  return 0;
}
