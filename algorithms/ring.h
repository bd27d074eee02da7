// Ring schedules: every rank talks only to its neighbours r-1 and r+1.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::ring {

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);

// Cost of the ring schedule for args.coll (see the formulas in ring.cpp).
double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::ring
