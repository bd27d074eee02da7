// Butterfly phases over a power-of-two group of ranks and a region of the
// vector: recursive halving reduce-scatter, recursive doubling all-gather and
// recursive doubling all-reduce. The flat butterfly algorithms run them on the
// ranks left after folding; hierarchical runs them on one level's group.
#pragma once

#include <vector>

#include "sched/build_util.h"

namespace weft::algo {

// Elements of parts [lo, hi) of `reg` cut into m nearly equal parts.
inline sched::Part butterfly_span(sched::Part reg, int m, int lo, int hi) {
  using namespace sched;
  const uint64_t um = static_cast<uint64_t>(m);
  const uint64_t begin = even_part(reg.count, um, static_cast<uint64_t>(lo)).offset;
  const uint64_t end = hi >= m ? reg.count : even_part(reg.count, um, static_cast<uint64_t>(hi)).offset;
  return {reg.offset + begin, end - begin};
}

// Recursive halving among `group` (a power of two of real ranks; this rank is
// group[i]): round d keeps the half of the current window on this rank's side of
// bit d, sends the other half to group[i ^ d] and adds the partner's copy of its
// own. `input` holds this rank's operand (Send, or Recv for a partial sum made
// earlier). Afterwards group[i] holds part i of `reg`, reduced over the group, in
// Recv. `only` >= 0: just that one of its lg(m) rounds (the window and buffers of
// the earlier ones still followed), for builders that interleave phases round by
// round; likewise below.
inline void halving_reduce_scatter(sched::PlanBuilder& b, const std::vector<int>& group, int i, sched::Part reg,
                                   sched::Buf input, int64_t only = -1) {
  using namespace sched;
  const int m = static_cast<int>(group.size());
  int lo = 0, hi = m;
  Buf src = input;
  for (int d = m / 2, round = 0; d >= 1; d /= 2, ++round) {
    const int partner = group[static_cast<size_t>(i ^ d)], mid = lo + (hi - lo) / 2;
    const bool upper = i & d;
    const Part give = upper ? butterfly_span(reg, m, lo, mid) : butterfly_span(reg, m, mid, hi);
    const Part keep = upper ? butterfly_span(reg, m, mid, hi) : butterfly_span(reg, m, lo, mid);
    if (only < 0 || only == round) {
      b.send(partner, {src, give.offset, give.count});
      b.recv_reduce(partner, recv_buf(keep.offset, keep.count), {src, keep.offset, keep.count});
    }
    src = Buf::Recv;
    (upper ? lo : hi) = mid;
  }
}

// Recursive doubling all-gather retracing halving_reduce_scatter's rounds: group[i]
// starts with part i of `reg` in Recv and ends with all of it.
inline void doubling_all_gather(sched::PlanBuilder& b, const std::vector<int>& group, int i, sched::Part reg,
                                int64_t only = -1) {
  using namespace sched;
  const int m = static_cast<int>(group.size());
  int lo = i, hi = i + 1;
  for (int d = 1, round = 0; d < m; d <<= 1, ++round) {
    const int partner = group[static_cast<size_t>(i ^ d)];
    const bool upper = i & d;
    const Part mine = butterfly_span(reg, m, lo, hi);
    const Part theirs = upper ? butterfly_span(reg, m, lo - d, lo) : butterfly_span(reg, m, hi, hi + d);
    if (only < 0 || only == round) {
      b.send(partner, recv_buf(mine.offset, mine.count));
      b.recv(partner, recv_buf(theirs.offset, theirs.count));
    }
    (upper ? lo : hi) = upper ? lo - d : hi + d;
  }
}

// Recursive doubling all-reduce of `reg` among `group`: round d swaps the whole
// running sum with group[i ^ d] and adds the partner's. Result in Recv.
inline void doubling_all_reduce(sched::PlanBuilder& b, const std::vector<int>& group, int i, sched::Part reg,
                                sched::Buf input, int64_t only = -1) {
  using namespace sched;
  const int m = static_cast<int>(group.size());
  Buf src = input;
  for (int d = 1, round = 0; d < m; d <<= 1, ++round) {
    const int partner = group[static_cast<size_t>(i ^ d)];
    if (only < 0 || only == round) {
      b.send(partner, {src, reg.offset, reg.count});
      b.recv_reduce(partner, recv_buf(reg.offset, reg.count), {src, reg.offset, reg.count});
    }
    src = Buf::Recv;
  }
}

inline bool power_of_two(int m) { return m > 0 && (m & (m - 1)) == 0; }

// lg m for a power of two m: the rounds of the phases above.
inline int lg_exact(int m) {
  int l = 0;
  while ((1 << l) < m) ++l;
  return l;
}

}  // namespace weft::algo
