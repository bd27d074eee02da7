// Hierarchical all-reduce for nodes of BuildArgs::local_size consecutive ranks,
// each node optionally cut into NUMA domains (or GPU islands) of
// BuildArgs::domain_size consecutive ranks: reduce-scatter inside each domain,
// then across the node's domains, all-reduce each rank's share across nodes,
// all-gather back up. Only 1/local_size of the vector crosses the inter-node
// links per rank, and 1/domain_size the links between domains.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::hierarchical {

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);

// local_size > 0 and divides nranks; domain_size, when set, divides local_size.
bool supports(const sched::BuildArgs& args);

// One LinkCost for every level; the tuner simulates the schedule with a cost per
// level where the communicator spans domains or nodes.
double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::hierarchical
