// Pairwise all-to-all: in step s rank r sends to r+s and receives from r-s, so
// every step is a permutation and no link carries two messages at once.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::pairwise {

sched::RankPlan alltoall(const sched::BuildArgs& args, int rank);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::pairwise
