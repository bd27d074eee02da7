// Ring reduce-scatter and all-gather over an arbitrary group of ranks and region
// of the vector, for builders that compose rings (hierarchical). ring.cpp keeps
// its own interleaved all-reduce loop, which pipelines across both phases.
#pragma once

#include <vector>

#include "sched/build_util.h"

namespace weft::algo {

// Reduce-scatter of region `reg` among `group` (real ranks; this rank is
// group[i]), cut into group.size() nearly equal parts. `input` is where this
// rank's operand lives (Send for raw input, Recv for a partial sum made by an
// earlier phase). Afterwards group[i] holds part (i+1) % m, reduced over the
// group, in `acc` (Recv, or Scratch laid out like the vector where the rank has
// no receive buffer, as non-roots of a reduce). `only` >= 0: just that one of its
// rounds x (m - 1) steps, for builders that interleave phases step by step.
inline void ring_reduce_scatter(sched::PlanBuilder& b, const std::vector<int>& group, int i, sched::Part reg,
                                sched::Buf input, uint64_t slice_elems, sched::Buf acc = sched::Buf::Recv,
                                int64_t only = -1) {
  using namespace sched;
  const int m = static_cast<int>(group.size());
  if (m <= 1) return;
  const int next = group[static_cast<size_t>(mod(i + 1, m))], prev = group[static_cast<size_t>(mod(i - 1, m))];
  auto piece = [&](int part, uint64_t j) {
    Part p = even_part(reg.count, static_cast<uint64_t>(m), static_cast<uint64_t>(mod(part, m)));
    p.offset += reg.offset;
    return slice_of(p, slice_elems, j);
  };
  const uint64_t rounds = num_slices((reg.count + static_cast<uint64_t>(m) - 1) / static_cast<uint64_t>(m), slice_elems);
  for (uint64_t j = 0; j < rounds; ++j)
    for (int s = 0; s < m - 1; ++s) {
      if (only >= 0 && static_cast<uint64_t>(only) != j * static_cast<uint64_t>(m - 1) + static_cast<uint64_t>(s))
        continue;
      const Part out = piece(i - s, j), in = piece(i - s - 1, j);
      b.send(next, {s == 0 ? input : acc, out.offset, out.count});
      b.recv_reduce(prev, {acc, in.offset, in.count}, {input, in.offset, in.count});
    }
}

// All-gather of region `reg` among `group`, where group[i] starts with part
// (i+1) % m in Recv (the layout ring_reduce_scatter leaves). `only` as above.
inline void ring_all_gather(sched::PlanBuilder& b, const std::vector<int>& group, int i, sched::Part reg,
                            uint64_t slice_elems, int64_t only = -1) {
  using namespace sched;
  const int m = static_cast<int>(group.size());
  if (m <= 1) return;
  const int next = group[static_cast<size_t>(mod(i + 1, m))], prev = group[static_cast<size_t>(mod(i - 1, m))];
  auto piece = [&](int part, uint64_t j) {
    Part p = even_part(reg.count, static_cast<uint64_t>(m), static_cast<uint64_t>(mod(part, m)));
    p.offset += reg.offset;
    return slice_of(p, slice_elems, j);
  };
  const uint64_t rounds = num_slices((reg.count + static_cast<uint64_t>(m) - 1) / static_cast<uint64_t>(m), slice_elems);
  for (uint64_t j = 0; j < rounds; ++j)
    for (int s = 0; s < m - 1; ++s) {
      if (only >= 0 && static_cast<uint64_t>(only) != j * static_cast<uint64_t>(m - 1) + static_cast<uint64_t>(s))
        continue;
      const Part out = piece(i + 1 - s, j), in = piece(i - s, j);
      b.send(next, recv_buf(out.offset, out.count));
      b.recv(prev, recv_buf(in.offset, in.count));
    }
}

}  // namespace weft::algo
