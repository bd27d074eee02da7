#include "algorithms/double_tree.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "sched/build_util.h"

namespace weft::algo::double_tree {

using namespace weft::sched;

namespace {

// In-order balanced binary tree over positions [lo, hi): the middle position is
// the subtree's root. Leaves fall on about every other position, so shifting
// (even n) or mirroring (odd n) the positions makes them interior in tree 2.
void build(std::vector<TreeNode>& t, int lo, int hi, int parent, int side, int depth) {
  if (lo >= hi) return;
  const int mid = lo + (hi - lo) / 2;
  TreeNode& nd = t[static_cast<size_t>(mid)];
  nd.parent = parent;
  nd.depth = depth;
  if (parent >= 0) t[static_cast<size_t>(parent)].child[side] = mid;
  build(t, lo, mid, mid, 0, depth + 1);
  build(t, mid + 1, hi, mid, 1, depth + 1);
}

}  // namespace

// Rank <-> position maps: identity for tree 0; shift by one (even n) or mirror
// (odd n) for tree 1.
TreeNode node_of(int n, int rank, int which) {
  std::vector<TreeNode> t(static_cast<size_t>(n));
  build(t, 0, n, -1, 0, 0);
  auto pos = [&](int r) { return which == 0 ? r : (n % 2 == 0 ? mod(r + 1, n) : n - 1 - r); };
  auto rank_at = [&](int p) { return which == 0 ? p : (n % 2 == 0 ? mod(p - 1, n) : n - 1 - p); };
  const TreeNode& nd = t[static_cast<size_t>(pos(rank))];
  TreeNode out;
  out.parent = nd.parent < 0 ? -1 : rank_at(nd.parent);
  out.depth = nd.depth;
  for (int s = 0; s < 2; ++s) out.child[s] = nd.child[s] < 0 ? -1 : rank_at(nd.child[s]);
  return out;
}

int depth(int n) { return n <= 1 ? 0 : static_cast<int>(std::floor(std::log2(static_cast<double>(n)))); }

// The vector is split in one part per tree (two for a double tree); part t is
// reduced up tree t (children into our Recv, then to the parent) and broadcast back
// down it, slice by slice. NCCL runs each tree's two directions on threads of their
// own; a weft rank has one sequence of steps, so it orders its streams (up and down
// each tree) by when their input is due if every hop takes one slice period: slice j
// of tree t comes up from the children at j + d - depth and down from the parent at
// j + d + depth (depth: our hops from t's root). A rank deep in one tree and high in
// the other (a chain's ranks) then works on different slices of the two trees at
// once instead of waiting for each slice to pass through both chains (slice by slice
// was 4.5x slower at 16 x 8 in weft-sim; weighting slices or hops twice was slower
// than equal weights on flat and two-level fabrics). Every message's key is its
// sender's plus one, so the messages between two ranks come in the same order at
// both ends (ties: reduce first, then the lower tree), and no rank waits on one that
// waits on it: the orders cannot deadlock.
RankPlan trees_allreduce(const BuildArgs& a, std::span<const TreeNode> nodes, int d) {
  PlanBuilder b;
  if (a.nranks == 1) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  const auto T = static_cast<int>(nodes.size());
  std::vector<Part> parts;
  for (int t = 0; t < T; ++t) parts.push_back(even_part(a.count, static_cast<uint64_t>(T), static_cast<uint64_t>(t)));
  const uint64_t k = num_slices(parts[0].count, a.slice_elems);
  struct Op {
    int64_t key;
    bool down;
    int tree;
    uint64_t slice;
  };
  std::vector<Op> ops;
  ops.reserve(2 * static_cast<size_t>(T) * k);
  for (int t = 0; t < T; ++t)
    for (uint64_t j = 0; j < k; ++j) {
      const int64_t at = static_cast<int64_t>(j) + d;
      const int depth = nodes[static_cast<size_t>(t)].depth;
      ops.push_back({at - depth, false, t, j});
      ops.push_back({at + depth, true, t, j});
    }
  std::sort(ops.begin(), ops.end(), [](const Op& x, const Op& y) {
    return std::tie(x.key, x.down, x.tree, x.slice) < std::tie(y.key, y.down, y.tree, y.slice);
  });
  for (const Op& op : ops) {
    const auto t = static_cast<size_t>(op.tree);
    const TreeNode& node = nodes[t];
    const Part p = slice_of(parts[t], a.slice_elems, op.slice);
    if (!op.down) {
      Range cur = send_buf(p.offset, p.count);
      for (int child : node.child) {
        if (child < 0) continue;
        b.recv_reduce(child, recv_buf(p.offset, p.count), cur);
        cur = recv_buf(p.offset, p.count);
      }
      if (node.parent >= 0) b.send(node.parent, cur);
      else if (cur.buf == Buf::Send) b.copy(recv_buf(p.offset, p.count), cur);  // childless root
    } else {
      if (node.parent >= 0) b.recv(node.parent, recv_buf(p.offset, p.count));
      for (int child : node.child)
        if (child >= 0) b.send(child, recv_buf(p.offset, p.count));
    }
  }
  return b.take();
}

// A rank is interior (2 children) in at most one tree for most n, so per phase it
// receives about N and sends about N:
//   T = 2(d + k - 1) alpha + 2 (1 + (d-1)/k) N beta + N gamma,   d = floor(lg n)
RankPlan allreduce(const BuildArgs& a, int r) {
  const TreeNode nodes[2] = {node_of(a.nranks, r, 0), node_of(a.nranks, r, 1)};
  return trees_allreduce(a, nodes, depth(a.nranks));
}

double tree_cost(double d, const BuildArgs& a, size_t elem_size, const LinkCost& c, int trees) {
  const double N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  const auto T = static_cast<uint64_t>(trees);
  const double k = static_cast<double>(std::max<uint64_t>(1, num_slices((a.count + T - 1) / T, a.slice_elems)));
  return 2 * (d + k - 1) * c.alpha_s + 2 * (1 + (d - 1) / k) * N * c.beta_s_per_byte + N * c.gamma_s_per_byte;
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || a.coll != Coll::AllReduce) return 0;
  return tree_cost(depth(a.nranks), a, elem_size, c);
}

}  // namespace weft::algo::double_tree
