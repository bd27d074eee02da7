#include "algorithms/tree.h"

#include <algorithm>
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

// Whether the all-reduce's ranks other than the root send a slice up before the
// one before it has come down (below): where the ranks span hosts, whose links
// carry each direction on its own (2 hosts x 2 ranks, 2 Gb/s: 16 MiB in 83 ms
// against 130). Within a host both directions are copies through the same memory:
// there it was no faster (16 and 64 MiB on 2 and 4 ranks, three interleaved runs
// each), and the slices keep the order whose cost the formula gives exactly.
bool sends_ahead(const BuildArgs& a) { return a.local_size > 0 && a.local_size < a.nranks; }

}  // namespace

// Binomial reduce to rank 0 then binomial broadcast from it, per slice:
//   T = 2 lg(n) k alpha + 2 lg(n) N beta + lg(n) N gamma
// Where the ranks span hosts (sends_ahead), every rank but the root sends slice j+1
// up before it waits for slice j to come down, so a rank's links up and down carry
// different slices at once; waiting first, a slice's round trip to the root passes
// before the next slice goes up. (The root sends each slice down as soon as it is
// reduced: waiting for the next slice first would bring the round trip back.)
// k slices of s = N / k bytes on 2 ranks, c = alpha + s beta, g = s gamma: up j
// arrives A(j) = max(D(j-2), A(j-1)) + c (A(0) = c, A(1) = 2c), the root has reduced
// it at R(j) = max(A(j), R(j-1)) + g, and it is back down at D(j) = max(R(j),
// D(j-1)) + c; T = D(k-1), (k+1) c + ceil(k/2) g where c >= g, against k (2c + g)
// when each slice waited for the one before. With more ranks a rank's slices
// still take turns with its children's, and the formula above is an upper bound
// (the simulator, a rank per host, 16 slices: 0.89x at 4 ranks, 0.82x at 8).
RankPlan allreduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  if (n == 1) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  const uint64_t k = num_slices(a.count, a.slice_elems);
  const auto part = [&](uint64_t j) { return slice_of({0, a.count}, a.slice_elems, j); };
  const uint64_t ahead = r != 0 && sends_ahead(a) ? 1 : 0;  // slices reduced before the first comes down
  for (uint64_t j = 0; j < std::min(ahead, k); ++j) reduce_slice(b, r, 0, n, part(j), Buf::Send, Buf::Recv);
  for (uint64_t j = 0; j < k; ++j) {
    if (j + ahead < k) reduce_slice(b, r, 0, n, part(j + ahead), Buf::Send, Buf::Recv);
    broadcast_slice(b, r, 0, n, part(j), Buf::Recv);
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
    case Coll::AllReduce: {
      if (a.nranks != 2 || k == 1 || !sends_ahead(a)) return 2 * L * k * al + 2 * L * N * be + L * N * ga;
      const double s = N / k, cc = al + s * be, g = s * ga;  // the recurrence above the builder
      double up = 0, reduced = 0, down_two_before = 0, down = 0;  // A(j-1), R(j-1), D(j-2), D(j-1)
      for (uint64_t j = 0; j < static_cast<uint64_t>(k); ++j) {
        up = std::max(down_two_before, up) + cc;
        reduced = std::max(up, reduced) + g;
        down_two_before = down;
        down = std::max(reduced, down) + cc;
      }
      return down;
    }
    case Coll::Broadcast: return L * k * al + L * N * be;
    case Coll::Reduce: return L * k * al + L * N * (be + ga);
    default: return 0;
  }
}

}  // namespace weft::algo::tree
