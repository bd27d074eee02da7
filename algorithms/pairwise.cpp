#include "algorithms/pairwise.h"

#include "sched/build_util.h"

namespace weft::algo::pairwise {

using namespace weft::sched;

// Block p of the input goes to rank p; block q of the output comes from rank q.
// All sends are listed before the receives: sends never block and carry their
// data as of the step, so an in-place call (output = input) may overwrite block
// r-s as it arrives even though that block has already left for rank r-s.
//   T = (n-1)(alpha + N beta), N = bytes per peer block
RankPlan alltoall(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  const uint64_t c = a.count;
  auto block = [&](int p) { return static_cast<uint64_t>(p) * c; };
  b.copy(recv_buf(block(r), c), send_buf(block(r), c));
  for (int s = 1; s < n; ++s) b.send(mod(r + s, n), send_buf(block(mod(r + s, n)), c));
  for (int s = 1; s < n; ++s) b.recv(mod(r - s, n), recv_buf(block(mod(r - s, n)), c));
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || a.coll != Coll::AllToAll) return 0;
  const double N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  return (a.nranks - 1.0) * (c.alpha_s + N * c.beta_s_per_byte);
}

}  // namespace weft::algo::pairwise
