// Double binary tree all-reduce (as in NCCL): two binary trees, each carrying
// half of the vector, built so that most ranks that are interior in one tree are
// leaves in the other. Latency like a tree (depth ~lg n), bandwidth close to ring.
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::double_tree {

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::double_tree
