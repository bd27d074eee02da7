// Hierarchical all-reduce for nodes of BuildArgs::local_size consecutive ranks:
// reduce-scatter inside each node, all-reduce each node-local share across
// nodes, all-gather inside each node. Only 1/local_size of the vector crosses
// the (slower) inter-node links per rank.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::hierarchical {

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);

// local_size > 0 and divides nranks.
bool supports(const sched::BuildArgs& args);

// One LinkCost for both levels; a tuner with distinct intra/inter costs should
// evaluate the three phase terms in hierarchical.cpp separately.
double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::hierarchical
