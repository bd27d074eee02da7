// Reduce for large vectors (Rabenseifner's idea with a ring): ring
// reduce-scatter, then every rank sends its finished part straight to the root.
// Moves about 2N per rank instead of the chain's or tree's N per hop.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::reducescatter_gather {

sched::RankPlan reduce(const sched::BuildArgs& args, int rank);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::reducescatter_gather
