#include "algorithms/direct.h"

#include "sched/build_util.h"

namespace weft::algo::direct {

using namespace weft::sched;

// Rank r owns chunk r (n nearly equal chunks). Phase 1: send chunk j of our input
// to rank j, add the n-1 incoming copies of chunk r. Phase 2: send the finished
// chunk r to everyone and receive every other chunk into place. Each chunk is
// reduced by exactly one rank, so all ranks get bit-identical results.
//   T = 2(n-1) alpha + 2(n-1)/n N beta + (n-1)/n N gamma
RankPlan allreduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  const uint64_t un = static_cast<uint64_t>(n);
  if (n == 1) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  auto chunk = [&](int i) { return even_part(a.count, un, static_cast<uint64_t>(i)); };
  const Part mine = chunk(r);
  for (int s = 1; s < n; ++s) {
    const Part p = chunk(mod(r + s, n));
    b.send(mod(r + s, n), send_buf(p.offset, p.count));
  }
  Range cur = send_buf(mine.offset, mine.count);
  for (int s = 1; s < n; ++s) {
    b.recv_reduce(mod(r - s, n), recv_buf(mine.offset, mine.count), cur);
    cur = recv_buf(mine.offset, mine.count);
  }
  for (int s = 1; s < n; ++s) b.send(mod(r + s, n), recv_buf(mine.offset, mine.count));
  for (int s = 1; s < n; ++s) {
    const Part p = chunk(mod(r - s, n));
    b.recv(mod(r - s, n), recv_buf(p.offset, p.count));
  }
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || a.coll != Coll::AllReduce) return 0;
  const double n = a.nranks, N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  return 2 * (n - 1) * c.alpha_s + 2 * (n - 1) / n * N * c.beta_s_per_byte + (n - 1) / n * N * c.gamma_s_per_byte;
}

}  // namespace weft::algo::direct
