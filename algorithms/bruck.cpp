#include "algorithms/bruck.h"

#include <algorithm>
#include <cmath>

#include "sched/build_util.h"

namespace weft::algo::bruck {

using namespace weft::sched;

// Before round d (d = 1, 2, 4, ...) rank r holds blocks r .. r+d-1 (mod n). It
// sends the first min(d, n-d) of them to r-d and receives as many from r+d, which
// are blocks r+d .. . A run that wraps past block n-1 travels as two messages;
// both ends split it at the same place because it is the same run of blocks.
//   T = ceil(lg n) alpha + (n-1) N beta
RankPlan allgather(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  const uint64_t c = a.count;
  b.copy(recv_buf(static_cast<uint64_t>(r) * c, c), send_buf(0, c));
  // Blocks [first, first+cnt) mod n as at most two contiguous Recv ranges.
  auto for_run = [&](int first, int cnt, auto&& emit) {
    const int head = std::min(cnt, n - first);
    emit(recv_buf(static_cast<uint64_t>(first) * c, static_cast<uint64_t>(head) * c));
    if (cnt > head) emit(recv_buf(0, static_cast<uint64_t>(cnt - head) * c));
  };
  for (int d = 1; d < n; d <<= 1) {
    const int cnt = std::min(d, n - d), to = mod(r - d, n), from = mod(r + d, n);
    for_run(r, cnt, [&](Range rg) { b.send(to, rg); });
    for_run(from, cnt, [&](Range rg) { b.recv(from, rg); });
  }
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || a.coll != Coll::AllGather) return 0;
  const double N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  return std::ceil(std::log2(static_cast<double>(a.nranks))) * c.alpha_s + (a.nranks - 1.0) * N * c.beta_s_per_byte;
}

}  // namespace weft::algo::bruck
