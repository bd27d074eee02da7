// Several rings at once (NCCL's channels), for nodes of BuildArgs::local_size
// consecutive ranks: the vector is cut into C = min(4, local_size) regions, and
// region c goes round a ring whose order within every node starts c x L / C
// ranks further on, so that each ring leaves a node from a different rank: on
// hosts with a network port per few ranks, the rings cross hosts through
// different ports where one ring uses one.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::rings {

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);

// local_size > 0 and divides nranks.
bool supports(const sched::BuildArgs& args);

// The rings in use for args: min(4, local_size).
int channels(const sched::BuildArgs& args);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::rings
