// Naive schedules: everything goes through one root or straight to its final
// owner. Few rounds and simple, but the root's link carries (n-1) full vectors;
// useful as a baseline and for tiny n.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::naive {

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);
sched::RankPlan broadcast(const sched::BuildArgs& args, int rank);
sched::RankPlan reduce(const sched::BuildArgs& args, int rank);
sched::RankPlan allgather(const sched::BuildArgs& args, int rank);
sched::RankPlan reducescatter(const sched::BuildArgs& args, int rank);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::naive
