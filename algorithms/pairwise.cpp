#include "algorithms/pairwise.h"

#include "sched/build_util.h"

namespace weft::algo::pairwise {

using namespace weft::sched;

namespace {
// Partner of rank r in round k of a round-robin tournament (circle method): every
// round is a perfect matching, so both ends of a pair exchange in the same round.
// Odd n: n rounds, partner (k - r) mod n, idle (-1) when that is r itself. Even
// n: the circle over the first n-1 ranks, whose idle rank pairs with rank n-1
// instead. Returns -1 for an idle round.
int partner(int n, int r, int k) {
  if (n % 2 == 1) {
    const int q = mod(k - r, n);
    return q == r ? -1 : q;
  }
  const int m = n - 1;
  if (r == m) return mod(k * ((m + 1) / 2), m);  // the r' with 2r' = k (mod m); m is odd
  const int q = mod(k - r, m);
  return q == r ? m : q;
}
}  // namespace

// Block p of the input goes to rank p; block q of the output comes from rank q.
// Round k: exchange with the round's partner q, sending block q and receiving
// into block q. In place that receive overwrites the block just sent; the
// executor stages it until q has taken our send, and q is taking it in the same
// round, so the exchange cannot deadlock (all sends first, then all receives,
// would: every rank's first receive would wait on a peer's last).
//   T = (n-1)(alpha + N beta), N = bytes per peer block
RankPlan alltoall(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  const uint64_t c = a.count;
  auto block = [&](int p) { return static_cast<uint64_t>(p) * c; };
  b.copy(recv_buf(block(r), c), send_buf(block(r), c));
  const int rounds = n % 2 ? n : n - 1;
  for (int k = 0; k < rounds && n > 1; ++k) {
    const int q = partner(n, r, k);
    if (q < 0) continue;
    b.send(q, send_buf(block(q), c));
    b.recv(q, recv_buf(block(q), c));
  }
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || a.coll != Coll::AllToAll) return 0;
  const double N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  return (a.nranks - 1.0) * (c.alpha_s + N * c.beta_s_per_byte);
}

}  // namespace weft::algo::pairwise
