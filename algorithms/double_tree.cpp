#include "algorithms/double_tree.h"

#include <algorithm>
#include <cmath>

#include "sched/build_util.h"

namespace weft::algo::double_tree {

using namespace weft::sched;

namespace {

// In-order balanced binary tree over positions [lo, hi): the middle position is
// the subtree's root. Leaves fall on about every other position, so shifting
// (even n) or mirroring (odd n) the positions makes them interior in tree 2.
// Returns the subtree's height (-1: empty).
int build(std::vector<TreeNode>& t, int lo, int hi, int parent, int side) {
  if (lo >= hi) return -1;
  const int mid = lo + (hi - lo) / 2;
  TreeNode& nd = t[static_cast<size_t>(mid)];
  nd.parent = parent;
  if (parent >= 0) t[static_cast<size_t>(parent)].child[side] = mid;
  nd.height = 1 + std::max(build(t, lo, mid, mid, 0), build(t, mid + 1, hi, mid, 1));
  return nd.height;
}

}  // namespace

// Rank <-> position maps: identity for tree 0; shift by one (even n) or mirror
// (odd n) for tree 1.
TreeNode node_of(int n, int rank, int which) {
  std::vector<TreeNode> t(static_cast<size_t>(n));
  build(t, 0, n, -1, 0);
  auto pos = [&](int r) { return which == 0 ? r : (n % 2 == 0 ? mod(r + 1, n) : n - 1 - r); };
  auto rank_at = [&](int p) { return which == 0 ? p : (n % 2 == 0 ? mod(p - 1, n) : n - 1 - p); };
  const TreeNode& nd = t[static_cast<size_t>(pos(rank))];
  TreeNode out;
  out.parent = nd.parent < 0 ? -1 : rank_at(nd.parent);
  out.height = nd.height;
  for (int s = 0; s < 2; ++s) out.child[s] = nd.child[s] < 0 ? -1 : rank_at(nd.child[s]);
  return out;
}

int depth(int n) { return n <= 1 ? 0 : static_cast<int>(std::floor(std::log2(static_cast<double>(n)))); }

// The vector is split in two halves; half t is reduced up tree t (children into
// our Recv, then to the parent) and broadcast back down it, slice by slice. The
// broadcast of slice j can start only once j has gone up and down the trees (2d
// hops), so a rank reduces `ahead` = 2d slices before it broadcasts the first:
// every level stays busy, as NCCL's up and down directions run at once. Within a
// slice tree 0 goes first in each direction. A reduce depends only on the
// subtree's reduces, which come before the subtree's broadcasts; a broadcast on
// its parent's, which follows the parent's reduce of the same slice and so ours.
// Within a slice, a rank reduces first in the tree where less is below it (a
// leaf sends at once) and broadcasts first where more is: else the two trees'
// transfers through a rank take turns instead of overlapping. Waits then run
// down to ever lower subtrees, so they cannot close a cycle. It does so only
// where its parents in the two trees differ and no child is the same in both (its
// two messages up, or down, then join different pairs, whose ends agree on the
// order); elsewhere tree 0 goes first on every rank alike. The verifier proves the orders deadlock-free.
RankPlan two_tree_allreduce(const BuildArgs& a, const TreeNode nodes[2], int d) {
  PlanBuilder b;
  if (a.nranks == 1) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  const Part halves[2] = {even_part(a.count, 2, 0), even_part(a.count, 2, 1)};
  const uint64_t k = num_slices(halves[0].count, a.slice_elems);
  const uint64_t ahead = std::min<uint64_t>(k, 2 * static_cast<uint64_t>(std::max(d, 1)));
  bool apart = nodes[0].parent != nodes[1].parent;
  for (int c : nodes[0].child)
    for (int d : nodes[1].child) apart = apart && (c < 0 || c != d);
  const bool up1 = apart && nodes[1].height < nodes[0].height;
  const bool down1 = apart && nodes[1].height > nodes[0].height;
  const int up[2] = {up1 ? 1 : 0, up1 ? 0 : 1};
  const int down[2] = {down1 ? 1 : 0, down1 ? 0 : 1};
  auto reduce_up = [&](uint64_t j) {
    for (int t : up) {
      const Part p = slice_of(halves[t], a.slice_elems, j);
      Range cur = send_buf(p.offset, p.count);
      for (int child : nodes[t].child) {
        if (child < 0) continue;
        b.recv_reduce(child, recv_buf(p.offset, p.count), cur);
        cur = recv_buf(p.offset, p.count);
      }
      if (nodes[t].parent >= 0) b.send(nodes[t].parent, cur);
      else if (cur.buf == Buf::Send) b.copy(recv_buf(p.offset, p.count), cur);  // childless root
    }
  };
  auto broadcast_down = [&](uint64_t j) {
    for (int t : down) {
      const Part p = slice_of(halves[t], a.slice_elems, j);
      if (nodes[t].parent >= 0) b.recv(nodes[t].parent, recv_buf(p.offset, p.count));
      for (int child : nodes[t].child)
        if (child >= 0) b.send(child, recv_buf(p.offset, p.count));
    }
  };
  for (uint64_t j = 0; j < k + ahead; ++j) {
    if (j < k) reduce_up(j);
    if (j >= ahead) broadcast_down(j - ahead);
  }
  return b.take();
}

// A rank is interior (2 children) in at most one tree for most n, so per phase it
// receives about N and sends about N:
//   T = 2(d + k - 1) alpha + 2 (1 + (d-1)/k) N beta + N gamma,   d = floor(lg n)
RankPlan allreduce(const BuildArgs& a, int r) {
  const TreeNode nodes[2] = {node_of(a.nranks, r, 0), node_of(a.nranks, r, 1)};
  return two_tree_allreduce(a, nodes, depth(a.nranks));
}

double tree_cost(double d, const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  const double N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  const double k = static_cast<double>(std::max<uint64_t>(1, num_slices((a.count + 1) / 2, a.slice_elems)));
  return 2 * (d + k - 1) * c.alpha_s + 2 * (1 + (d - 1) / k) * N * c.beta_s_per_byte + N * c.gamma_s_per_byte;
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || a.coll != Coll::AllReduce) return 0;
  return tree_cost(depth(a.nranks), a, elem_size, c);
}

}  // namespace weft::algo::double_tree
