#include "algorithms/tree.h"

#include <cmath>

#include "algorithms/binomial.h"
#include "sched/build_util.h"

namespace weft::algo::tree {

using namespace weft::sched;

namespace {

using binomial::children_of;
using binomial::parent_of;

int real(int v, int root, int n) { return mod(v + root, n); }

// Reduces slice p of every rank's `mine` into `acc` up the tree and sends it to
// the parent (the root keeps it). A leaf sends its input directly.
void reduce_slice(PlanBuilder& b, int v, int root, int n, Part p, Buf mine, Buf acc) {
  const std::vector<int> kids = children_of(v, n);
  Range cur{mine, p.offset, p.count};
  for (int kid : kids) {
    const Range dst{acc, p.offset, p.count};
    b.recv_reduce(real(kid, root, n), dst, cur);
    cur = dst;
  }
  if (v != 0) b.send(real(parent_of(v), root, n), cur);
}

// Broadcasts slice p from the root's `src` down the tree into everyone's Recv.
void broadcast_slice(PlanBuilder& b, int v, int root, int n, Part p, Buf root_src) {
  Buf from = root_src;
  if (v != 0) {
    b.recv(real(parent_of(v), root, n), recv_buf(p.offset, p.count));
    from = Buf::Recv;
  }
  const std::vector<int> kids = children_of(v, n);
  for (auto it = kids.rbegin(); it != kids.rend(); ++it) b.send(real(*it, root, n), {from, p.offset, p.count});
}

double lg(int n) { return n <= 1 ? 0 : std::ceil(std::log2(static_cast<double>(n))); }

}  // namespace

// Binomial reduce to rank 0 then binomial broadcast from it, per slice, so the
// broadcast of slice j overlaps the reduce of slice j+1. The root's lg n sends per
// slice are the bottleneck, so slicing only adds latency terms.
//   T = 2 lg(n) k alpha + 2 lg(n) N beta + lg(n) N gamma
RankPlan allreduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  if (n == 1) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  const uint64_t k = num_slices(a.count, a.slice_elems);
  for (uint64_t j = 0; j < k; ++j) {
    const Part p = slice_of({0, a.count}, a.slice_elems, j);
    reduce_slice(b, r, 0, n, p, Buf::Send, Buf::Recv);
    broadcast_slice(b, r, 0, n, p, Buf::Recv);
  }
  return b.take();
}

// Pipelined binomial broadcast from the root.
//   T = lg(n) k alpha + lg(n) N beta
RankPlan broadcast(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks, v = mod(r - a.root, n);
  if (v == 0) b.copy(recv_buf(0, a.count), send_buf(0, a.count));
  const uint64_t k = num_slices(a.count, a.slice_elems);
  for (uint64_t j = 0; j < k && n > 1; ++j)
    broadcast_slice(b, v, a.root, n, slice_of({0, a.count}, a.slice_elems, j), Buf::Send);
  return b.take();
}

// Pipelined binomial reduce to the root; inner non-root ranks accumulate in
// scratch because only the root has a receive buffer.
//   T = lg(n) k alpha + lg(n) N (beta + gamma)
RankPlan reduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks, v = mod(r - a.root, n);
  if (n == 1) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  const Buf acc = v == 0 ? Buf::Recv : Buf::Scratch;
  if (v != 0 && !children_of(v, n).empty()) b.need_scratch(a.count);
  const uint64_t k = num_slices(a.count, a.slice_elems);
  for (uint64_t j = 0; j < k; ++j) reduce_slice(b, v, a.root, n, slice_of({0, a.count}, a.slice_elems, j), Buf::Send, acc);
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1) return 0;
  const double L = lg(a.nranks), N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  const double k = static_cast<double>(std::max<uint64_t>(1, num_slices(a.count, a.slice_elems)));
  const double al = c.alpha_s, be = c.beta_s_per_byte, ga = c.gamma_s_per_byte;
  switch (a.coll) {
    case Coll::AllReduce: return 2 * L * k * al + 2 * L * N * be + L * N * ga;
    case Coll::Broadcast: return L * k * al + L * N * be;
    case Coll::Reduce: return L * k * al + L * N * (be + ga);
    default: return 0;
  }
}

}  // namespace weft::algo::tree
