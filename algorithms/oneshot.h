// One-shot all-reduce: one round of messages, for vectors small enough that
// latency is everything.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::oneshot {

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::oneshot
