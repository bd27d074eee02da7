#include "algorithms/naive.h"

#include "sched/build_util.h"

namespace weft::algo::naive {

using namespace weft::sched;

namespace {
// Root-side reduce of every other rank's whole vector into `acc`, in rank order
// (root's own input first), so the result does not depend on arrival timing.
void gather_reduce(PlanBuilder& b, int n, int root, Range acc, Range mine) {
  Range cur = mine;
  for (int j = 0; j < n; ++j) {
    if (j == root) continue;
    b.recv_reduce(j, acc, cur);
    cur = acc;
  }
}
}  // namespace

// Reduce to rank 0 (it adds all inputs in rank order), then rank 0 sends the sum
// to everyone.
//   T = 2(n-1)(alpha + N beta) + (n-1) N gamma
RankPlan allreduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  const Range in = send_buf(0, a.count), out = recv_buf(0, a.count);
  if (n == 1) {
    b.copy(out, in);
  } else if (r == 0) {
    gather_reduce(b, n, 0, out, in);
    for (int j = 1; j < n; ++j) b.send(j, out);
  } else {
    b.send(0, in);
    b.recv(0, out);
  }
  return b.take();
}

// The root sends its whole vector to every rank in turn.
//   T = (n-1)(alpha + N beta)
RankPlan broadcast(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  if (r == a.root) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    for (int s = 1; s < n; ++s) b.send(mod(r + s, n), send_buf(0, a.count));
  } else {
    b.recv(a.root, recv_buf(0, a.count));
  }
  return b.take();
}

// Every rank sends its vector to the root, which adds them in rank order.
//   T = (n-1)(alpha + N beta + N gamma)
RankPlan reduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  const Range in = send_buf(0, a.count);
  if (n == 1) {
    b.copy(recv_buf(0, a.count), in);
  } else if (r == a.root) {
    gather_reduce(b, n, r, recv_buf(0, a.count), in);
  } else {
    b.send(a.root, in);
  }
  return b.take();
}

// Every rank sends its block straight to every other rank (all sends first: they
// never block), then receives the others' blocks into place.
//   T = (n-1)(alpha + N beta)
RankPlan allgather(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  const uint64_t c = a.count;
  b.copy(recv_buf(static_cast<uint64_t>(r) * c, c), send_buf(0, c));
  for (int s = 1; s < n; ++s) b.send(mod(r + s, n), send_buf(0, c));
  for (int s = 1; s < n; ++s) {
    const int from = mod(r - s, n);
    b.recv(from, recv_buf(static_cast<uint64_t>(from) * c, c));
  }
  return b.take();
}

// Every rank sends block j of its input straight to rank j and adds the blocks it
// receives into its own.
//   T = (n-1)(alpha + N beta + N gamma)
RankPlan reducescatter(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  const uint64_t c = a.count, ur = static_cast<uint64_t>(r);
  if (n == 1) {
    b.copy(recv_buf(0, c), send_buf(0, c));
    return b.take();
  }
  for (int s = 1; s < n; ++s) {
    const int to = mod(r + s, n);
    b.send(to, send_buf(static_cast<uint64_t>(to) * c, c));
  }
  Range cur = send_buf(ur * c, c);
  for (int s = 1; s < n; ++s) {
    b.recv_reduce(mod(r - s, n), recv_buf(0, c), cur);
    cur = recv_buf(0, c);
  }
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1) return 0;
  const double m = a.nranks - 1.0, N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  const double al = c.alpha_s, be = c.beta_s_per_byte, ga = c.gamma_s_per_byte;
  switch (a.coll) {
    case Coll::AllReduce: return 2 * m * (al + N * be) + m * N * ga;
    case Coll::Broadcast:
    case Coll::AllGather: return m * (al + N * be);
    case Coll::Reduce:
    case Coll::ReduceScatter: return m * (al + N * be + N * ga);
    case Coll::AllToAll: return 0;
  }
  return 0;
}

}  // namespace weft::algo::naive
