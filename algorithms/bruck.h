// Bruck (dissemination) all-gather: ceil(lg n) rounds for any n, not only powers
// of two. Blocks are placed at their final offsets, so no rotation pass is needed.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::bruck {

sched::RankPlan allgather(const sched::BuildArgs& args, int rank);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::bruck
