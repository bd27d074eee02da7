// Ring schedules: every rank talks only to its neighbours r-1 and r+1, so each
// link carries one stream and bandwidth is optimal; latency grows with n.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::ring {

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);
sched::RankPlan broadcast(const sched::BuildArgs& args, int rank);
sched::RankPlan reduce(const sched::BuildArgs& args, int rank);
sched::RankPlan allgather(const sched::BuildArgs& args, int rank);
sched::RankPlan reducescatter(const sched::BuildArgs& args, int rank);

// Cost of the ring schedule for args.coll (formulas above each builder in ring.cpp).
double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::ring
