// NCCL's tree all-reduce for nodes of BuildArgs::local_size consecutive ranks: a
// chain through each node's ranks, and a double binary tree over the nodes
// joining the chains' ends; a part of the vector goes up and down each tree,
// pipelined by slices. As NCCL's channels, two pairs of such trees where nodes
// have 4 ranks or more, whose chains' ends are different ranks.
// Few steps cross nodes (2 lg M per slice, M nodes), so it keeps a tree's latency
// at scale while its bandwidth stays close to the ring's.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::chain_tree {

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);

// local_size > 0 and divides nranks.
bool supports(const sched::BuildArgs& args);

// Pairs of trees (NCCL's channels): 2 where local_size >= 4, else 1.
int pairs(const sched::BuildArgs& args);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::chain_tree
