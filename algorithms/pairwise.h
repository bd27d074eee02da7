// Pairwise-exchange all-to-all: n-1 rounds (n for odd n) in which the ranks pair
// up and swap the blocks meant for each other; each round is a perfect matching.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::pairwise {

sched::RankPlan alltoall(const sched::BuildArgs& args, int rank);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::pairwise
