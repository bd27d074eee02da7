#include "algorithms/scatter_allgather.h"

#include <cmath>

#include "algorithms/binomial.h"
#include "sched/build_util.h"

namespace weft::algo::scatter_allgather {

using namespace weft::sched;

// Relative rank v owns chunk v (n nearly equal chunks), so a binomial subtree's
// chunks [v, subtree_end) are one contiguous range. Scatter: every rank receives
// its subtree's chunks from its parent and passes each child its subtree's share.
// All-gather: ring over relative ranks; step s sends chunk v-s and receives chunk
// v-s-1. The root already holds everything and simply receives its own chunks
// back, which keeps the ring unbroken.
//   T = (lg(n) + n - 1) alpha + 2 (n-1)/n N beta
RankPlan broadcast(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks, v = mod(r - a.root, n);
  const uint64_t un = static_cast<uint64_t>(n);
  if (v == 0) b.copy(recv_buf(0, a.count), send_buf(0, a.count));
  if (n == 1) return b.take();
  auto real = [&](int rel) { return mod(rel + a.root, n); };
  // Elements of chunks [lo, hi).
  auto chunks = [&](int lo, int hi) {
    const uint64_t begin = even_part(a.count, un, static_cast<uint64_t>(lo)).offset;
    const uint64_t end = hi >= n ? a.count : even_part(a.count, un, static_cast<uint64_t>(hi)).offset;
    return Part{begin, end - begin};
  };
  if (v != 0) {
    const Part p = chunks(v, binomial::subtree_end(v, n));
    b.recv(real(binomial::parent_of(v)), recv_buf(p.offset, p.count));
  }
  const std::vector<int> kids = binomial::children_of(v, n);
  for (auto it = kids.rbegin(); it != kids.rend(); ++it) {
    const Part p = chunks(*it, binomial::subtree_end(*it, n));
    b.send(real(*it), {v == 0 ? Buf::Send : Buf::Recv, p.offset, p.count});
  }
  const int next = real(v + 1), prev = real(v - 1);
  for (int s = 0; s < n - 1; ++s) {
    const Part out = chunks(mod(v - s, n), mod(v - s, n) + 1), in = chunks(mod(v - s - 1, n), mod(v - s - 1, n) + 1);
    b.send(next, recv_buf(out.offset, out.count));
    b.recv(prev, recv_buf(in.offset, in.count));
  }
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || a.coll != Coll::Broadcast) return 0;
  const double n = a.nranks, N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  return (std::ceil(std::log2(n)) + n - 1) * c.alpha_s + 2 * (n - 1) / n * N * c.beta_s_per_byte;
}

}  // namespace weft::algo::scatter_allgather
