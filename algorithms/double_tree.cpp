#include "algorithms/double_tree.h"

#include <cmath>

#include "sched/build_util.h"

namespace weft::algo::double_tree {

using namespace weft::sched;

namespace {

// One rank's links in a tree.
struct Node {
  int parent = -1;
  int child[2] = {-1, -1};
};

// In-order balanced binary tree over positions [lo, hi): the middle position is
// the subtree's root. Leaves fall on about every other position, so shifting
// (even n) or mirroring (odd n) the positions makes them interior in tree 2.
void build(std::vector<Node>& t, int lo, int hi, int parent, int side) {
  if (lo >= hi) return;
  const int mid = lo + (hi - lo) / 2;
  t[static_cast<size_t>(mid)].parent = parent;
  if (parent >= 0) t[static_cast<size_t>(parent)].child[side] = mid;
  build(t, lo, mid, mid, 0);
  build(t, mid + 1, hi, mid, 1);
}

// Node of `rank` in tree `which` (0 or 1), as real ranks.
Node node_of(int n, int rank, int which) {
  std::vector<Node> t(static_cast<size_t>(n));
  build(t, 0, n, -1, 0);
  // Rank <-> position maps: identity for tree 0; shift by one (even n) or mirror
  // (odd n) for tree 1.
  auto pos = [&](int r) { return which == 0 ? r : (n % 2 == 0 ? mod(r + 1, n) : n - 1 - r); };
  auto rank_at = [&](int p) { return which == 0 ? p : (n % 2 == 0 ? mod(p - 1, n) : n - 1 - p); };
  const Node& nd = t[static_cast<size_t>(pos(rank))];
  Node out;
  out.parent = nd.parent < 0 ? -1 : rank_at(nd.parent);
  for (int s = 0; s < 2; ++s) out.child[s] = nd.child[s] < 0 ? -1 : rank_at(nd.child[s]);
  return out;
}

int depth(int n) { return n <= 1 ? 0 : static_cast<int>(std::floor(std::log2(static_cast<double>(n)))); }

}  // namespace

// The vector is split in two halves; half t is reduced up tree t (children into
// our Recv, then to the parent) and broadcast back down it. Per slice j both
// reduces run before both broadcasts; within each phase tree 0 goes first. Every
// rank's steps of one phase depend only on that phase in its subtree, so the
// interleaving cannot deadlock.
// A rank is interior (2 children) in at most one tree for most n, so per phase it
// receives about N and sends about N:
//   T = 2(d + k - 1) alpha + 2 (1 + (d-1)/k) N beta + N gamma,   d = floor(lg n)
RankPlan allreduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  if (n == 1) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  const Node nodes[2] = {node_of(n, r, 0), node_of(n, r, 1)};
  const Part halves[2] = {even_part(a.count, 2, 0), even_part(a.count, 2, 1)};
  const uint64_t k = num_slices(halves[0].count, a.slice_elems);
  for (uint64_t j = 0; j < k; ++j) {
    Part p[2];
    for (int t = 0; t < 2; ++t) p[t] = slice_of(halves[t], a.slice_elems, j);
    for (int t = 0; t < 2; ++t) {  // reduce up
      Range cur = send_buf(p[t].offset, p[t].count);
      for (int child : nodes[t].child) {
        if (child < 0) continue;
        b.recv_reduce(child, recv_buf(p[t].offset, p[t].count), cur);
        cur = recv_buf(p[t].offset, p[t].count);
      }
      if (nodes[t].parent >= 0) b.send(nodes[t].parent, cur);
      else if (cur.buf == Buf::Send) b.copy(recv_buf(p[t].offset, p[t].count), cur);  // childless root
    }
    for (int t = 0; t < 2; ++t) {  // broadcast down
      if (nodes[t].parent >= 0) b.recv(nodes[t].parent, recv_buf(p[t].offset, p[t].count));
      for (int child : nodes[t].child)
        if (child >= 0) b.send(child, recv_buf(p[t].offset, p[t].count));
    }
  }
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || a.coll != Coll::AllReduce) return 0;
  const double d = depth(a.nranks), N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  const double k = static_cast<double>(std::max<uint64_t>(1, num_slices((a.count + 1) / 2, a.slice_elems)));
  return 2 * (d + k - 1) * c.alpha_s + 2 * (1 + (d - 1) / k) * N * c.beta_s_per_byte + N * c.gamma_s_per_byte;
}

}  // namespace weft::algo::double_tree
