// NCCL's tree all-reduce for nodes of BuildArgs::local_size consecutive ranks: a
// chain through each node's ranks, and a double binary tree over the nodes
// joining the chains' ends; half of the vector goes up and down each tree,
// pipelined by slices.
// Few steps cross nodes (2 lg M per slice, M nodes), so it keeps a tree's latency
// at scale while its bandwidth stays close to the ring's.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::chain_tree {

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);

// local_size > 0 and divides nranks.
bool supports(const sched::BuildArgs& args);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::chain_tree
