// Small helpers every schedule builder uses: ranges, even partitions, slicing and
// a plan builder that drops zero-length steps (the IR never carries them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "sched/schedule.h"

namespace weft::sched {

inline Range send_buf(uint64_t offset, uint64_t count) { return {Buf::Send, offset, count}; }
inline Range recv_buf(uint64_t offset, uint64_t count) { return {Buf::Recv, offset, count}; }
inline Range scratch_buf(uint64_t offset, uint64_t count) { return {Buf::Scratch, offset, count}; }

// A contiguous piece [offset, offset + count) of some buffer.
struct Part {
  uint64_t offset = 0;
  uint64_t count = 0;
};

// The k-th of n nearly equal parts of `count` elements: the first count % n parts
// get one element more, so sizes differ by at most one and some may be empty.
inline Part even_part(uint64_t count, uint64_t n, uint64_t k) {
  const uint64_t base = count / n, rem = count % n;
  return {k * base + std::min(k, rem), base + (k < rem ? 1 : 0)};
}

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Number of pipeline slices of a piece of `count` elements; slice_elems 0 means the
// whole piece is one slice.
inline uint64_t num_slices(uint64_t count, uint64_t slice_elems) {
  if (count == 0) return 0;
  if (slice_elems == 0) return 1;
  return (count + slice_elems - 1) / slice_elems;
}

// Slice j of a part (empty when j is past its end), absolute offsets.
inline Part slice_of(Part p, uint64_t slice_elems, uint64_t j) {
  if (slice_elems == 0) return j == 0 ? p : Part{p.offset + p.count, 0};
  const uint64_t begin = std::min(p.count, j * slice_elems);
  const uint64_t end = std::min(p.count, begin + slice_elems);
  return {p.offset + begin, end - begin};
}

inline int mod(int a, int n) { return ((a % n) + n) % n; }

// Appends steps, skipping zero-length ones so builders can loop uniformly over
// uneven or empty chunks. Both ends of a message skip together because they derive
// the length from the same (chunk, slice) arithmetic.
class PlanBuilder {
 public:
  void send(int peer, Range src) {
    if (src.count) plan_.steps.push_back({Kind::Send, peer, {}, src});
  }
  void recv(int peer, Range dst) {
    if (dst.count) plan_.steps.push_back({Kind::Recv, peer, dst, {}});
  }
  void recv_reduce(int peer, Range dst, Range src) {
    if (dst.count) plan_.steps.push_back({Kind::RecvReduce, peer, dst, src});
  }
  // A copy of a range onto itself is dropped here; one that is a no-op only in
  // place (Send onto Recv) is kept, and the executor skips it at run time.
  void copy(Range dst, Range src) {
    if (dst.count && !(dst.buf == src.buf && dst.offset == src.offset))
      plan_.steps.push_back({Kind::Copy, -1, dst, src});
  }
  void reduce(Range dst, Range src) {
    if (dst.count) plan_.steps.push_back({Kind::Reduce, -1, dst, src});
  }
  // Scratch grows to cover every range handed to it.
  void need_scratch(uint64_t elems) { plan_.scratch_count = std::max(plan_.scratch_count, elems); }

  RankPlan take() { return std::move(plan_); }

 private:
  RankPlan plan_;
};

}  // namespace weft::sched
