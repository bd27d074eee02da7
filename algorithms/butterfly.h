// Butterfly (hypercube) schedules: partners differ in one bit of the rank, lg n
// rounds. Non-power-of-two n folds the first 2*rem ranks pairwise into rem before
// the butterfly and unfolds them after (rem = n - largest power of two <= n).
#pragma once

#include <cstdint>

#include "algorithms/registry.h"

namespace weft::algo::butterfly {

// All-reduce: recursive doubling below kRabenseifnerMinElems (or when there are
// fewer elements than butterfly ranks), Rabenseifner above.
constexpr uint64_t kRabenseifnerMinElems = 2048;
sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);
sched::RankPlan allreduce_recdoubling(const sched::BuildArgs& args, int rank);
sched::RankPlan allreduce_rabenseifner(const sched::BuildArgs& args, int rank);
sched::RankPlan reducescatter(const sched::BuildArgs& args, int rank);

// Whether `allreduce` picks Rabenseifner for these arguments.
bool uses_rabenseifner(const sched::BuildArgs& args);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);
double recdoubling_cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);
double rabenseifner_cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::butterfly
