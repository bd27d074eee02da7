// Broadcast for large vectors (van de Geijn): binomial scatter of n chunks from
// the root, then a ring all-gather of the chunks. Moves about 2N per rank instead
// of the tree's lg(n) N at the root.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::scatter_allgather {

sched::RankPlan broadcast(const sched::BuildArgs& args, int rank);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::scatter_allgather
