#include "algorithms/chain_tree.h"

#include <vector>

#include "algorithms/double_tree.h"
#include "sched/build_util.h"

namespace weft::algo::chain_tree {

using namespace weft::sched;
using double_tree::TreeNode;

bool supports(const BuildArgs& a) { return a.local_size > 0 && a.nranks % a.local_size == 0; }

// L ranks per node, M = n / L nodes, rank r = node * L + l. Tree 0 chains each
// node's ranks towards l = 0, tree 1 towards l = L - 1 (so each chain link
// carries one tree each way, and no rank has the same parent or child in both);
// a chain's end (its head) hangs, across nodes, below the head of node m's
// parent in double binary tree t over the M nodes, and above its children's.
// With P pairs of trees (NCCL's channels: P = 2 where L >= 4), pair q does the
// same with every node's ranks rotated by q L / P, so its heads, the ranks that
// cross nodes, are other ranks (and network ports) than pair 0's.
// Per slice (k of them) every part goes up and down, pipelined: every step
// moves N/(2Pk) per tree through d = (L - 1) + floor(lg M) levels:
//   T = 2(d + k - 1) alpha + 2 (1 + (d-1)/k) N beta + N gamma
RankPlan allreduce(const BuildArgs& a, int r) {
  const int L = supports(a) ? a.local_size : 1, M = a.nranks / L, node = r / L, P = pairs(a);
  std::vector<TreeNode> nodes(2 * static_cast<size_t>(P));
  for (int q = 0; q < P; ++q) {
    const int shift = q * L / P, l = mod(r % L - shift, L);  // l: the rank's place in the rotated node
    auto rank_at = [&](int nd, int x) { return nd * L + mod(x + shift, L); };
    for (int t = 0; t < 2; ++t) {
      TreeNode& nd = nodes[static_cast<size_t>(2 * q + t)];
      const TreeNode across = double_tree::node_of(M, node, t);
      // Position along tree t's chain: 0 is the head.
      const int pos = t == 0 ? l : L - 1 - l, step = t == 0 ? 1 : -1;
      nd.child[0] = pos + 1 < L ? rank_at(node, l + step) : -1;
      nd.depth = across.depth + pos;
      if (pos > 0) {
        nd.parent = rank_at(node, l - step);
        continue;
      }
      const int at = t == 0 ? 0 : L - 1;  // the heads' place within a rotated node
      nd.parent = across.parent < 0 ? -1 : rank_at(across.parent, at);
      for (int s = 0; s < 2; ++s) nd.child[1 + s] = across.child[s] < 0 ? -1 : rank_at(across.child[s], at);
    }
  }
  return double_tree::trees_allreduce(a, nodes, (L - 1) + double_tree::depth(M));
}

int pairs(const BuildArgs& a) { return supports(a) && a.local_size >= 4 ? 2 : 1; }

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || !supports(a)) return 0;
  const int L = a.local_size, M = a.nranks / L;
  return double_tree::tree_cost((L - 1) + double_tree::depth(M), a, elem_size, c, 2 * pairs(a));
}

}  // namespace weft::algo::chain_tree
