// Binomial-tree schedules: ceil(lg n) rounds, so latency grows only with lg n;
// every slice crosses the root's links lg n times, so bandwidth is worse than ring.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::tree {

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);
sched::RankPlan broadcast(const sched::BuildArgs& args, int rank);
sched::RankPlan reduce(const sched::BuildArgs& args, int rank);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::tree
