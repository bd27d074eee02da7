// Direct all-reduce: a reduce-scatter and an all-gather in which every rank talks
// to every other rank at once, with no forwarding.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::direct {

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::direct
