// Double binary tree all-reduce (as in NCCL): two binary trees, each carrying
// half of the vector, built so that most ranks that are interior in one tree are
// leaves in the other. Latency like a tree (depth ~lg n), bandwidth close to ring.
#pragma once

#include <span>

#include "algorithms/registry.h"

namespace weft::algo::double_tree {

// One rank's place in a tree (-1: none). Binary trees use two children; the
// chain tree's node heads a third (chain_tree.h).
struct TreeNode {
  int parent = -1;
  int child[3] = {-1, -1, -1};
  int depth = 0;  // hops from the root (the root: 0)
};

// The node of `rank` in double binary tree `which` (0 or 1) over n ranks.
TreeNode node_of(int n, int rank, int which);
// floor(lg n): the trees' depth.
int depth(int n);

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);
// The all-reduce over any trees of depth d, given this rank's node in each:
// part t of the vector (one per tree) is reduced up tree t and broadcast back
// down, pipelined by slices.
sched::RankPlan trees_allreduce(const sched::BuildArgs& args, std::span<const TreeNode> nodes, int d);
// Its cost for trees of depth d (the comment above allreduce in double_tree.cpp).
double tree_cost(double d, const sched::BuildArgs& args, size_t elem_size, const LinkCost& c, int trees = 2);

double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

}  // namespace weft::algo::double_tree
