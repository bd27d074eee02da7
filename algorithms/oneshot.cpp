#include "algorithms/oneshot.h"

#include "sched/build_util.h"

namespace weft::algo::oneshot {

using namespace weft::sched;

// Every rank sends its whole input to every other rank, receives theirs into
// scratch slot j (slot = sender's rank), and adds all n vectors locally in rank
// order x0 + x1 + ... so every rank computes bit-identical sums. Rank 0 sums into
// Recv directly; the others sum into slot 0 (already holding x0) and copy out at
// the end, because in place their own input must survive until its turn.
//   T = (n-1)(alpha + N beta) + (n-1) N gamma
RankPlan allreduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  const uint64_t c = a.count;
  const Range in = send_buf(0, c), out = recv_buf(0, c);
  if (n == 1) {
    b.copy(out, in);
    return b.take();
  }
  b.need_scratch(static_cast<uint64_t>(n) * c);
  auto slot = [&](int j) { return scratch_buf(static_cast<uint64_t>(j) * c, c); };
  for (int s = 1; s < n; ++s) b.send(mod(r + s, n), in);
  for (int s = 1; s < n; ++s) b.recv(mod(r - s, n), slot(mod(r - s, n)));
  if (r == 0) {
    b.copy(out, in);
    for (int j = 1; j < n; ++j) b.reduce(out, slot(j));
  } else {
    for (int j = 1; j < n; ++j) b.reduce(slot(0), j == r ? in : slot(j));
    b.copy(out, slot(0));
  }
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || a.coll != Coll::AllReduce) return 0;
  const double m = a.nranks - 1.0, N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  return m * (c.alpha_s + N * c.beta_s_per_byte) + m * N * c.gamma_s_per_byte;
}

}  // namespace weft::algo::oneshot
