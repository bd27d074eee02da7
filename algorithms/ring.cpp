#include "algorithms/ring.h"

#include "sched/build_util.h"

namespace weft::algo::ring {

using namespace weft::sched;

namespace {
// Slice rounds of the ring pipeline: chunks are count/n elements (rounded up), cut
// into slices of slice_elems; every round moves one slice of every chunk.
uint64_t rounds(uint64_t count, int n, uint64_t slice_elems) {
  const uint64_t chunk = (count + static_cast<uint64_t>(n) - 1) / static_cast<uint64_t>(n);
  return num_slices(chunk, slice_elems);
}
}  // namespace

// Ring all-reduce = reduce-scatter then all-gather over n chunks, each cut into
// slices (rounds) so the executor pipelines slice j+1 behind slice j.
//   Reduce-scatter step s: send chunk r-s, receive chunk r-s-1 and reduce it with
//   our own input; after n-1 steps rank r holds chunk r+1 fully reduced.
//   All-gather step s: send chunk r+1-s, receive chunk r-s.
// With N bytes and k slice rounds:
//   T = 2(n-1)k alpha + 2(n-1)/n N beta + (n-1)/n N gamma
RankPlan allreduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  const uint64_t un = static_cast<uint64_t>(n);
  if (n == 1) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  const int next = mod(r + 1, n), prev = mod(r - 1, n);
  auto piece = [&](int chunk, uint64_t j) {
    return slice_of(even_part(a.count, un, static_cast<uint64_t>(mod(chunk, n))), a.slice_elems, j);
  };
  const uint64_t k = rounds(a.count, n, a.slice_elems);
  for (uint64_t j = 0; j < k; ++j) {
    for (int s = 0; s < n - 1; ++s) {
      const Part out = piece(r - s, j), in = piece(r - s - 1, j);
      b.send(next, s == 0 ? send_buf(out.offset, out.count) : recv_buf(out.offset, out.count));
      b.recv_reduce(prev, recv_buf(in.offset, in.count), send_buf(in.offset, in.count));
    }
    for (int s = 0; s < n - 1; ++s) {
      const Part out = piece(r + 1 - s, j), in = piece(r - s, j);
      b.send(next, recv_buf(out.offset, out.count));
      b.recv(prev, recv_buf(in.offset, in.count));
    }
  }
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  const double n = a.nranks, N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  if (a.nranks <= 1) return 0;
  const double k = static_cast<double>(rounds(a.count, a.nranks, a.slice_elems));
  switch (a.coll) {
    case Coll::AllReduce:
      return 2 * (n - 1) * k * c.alpha_s + 2 * (n - 1) / n * N * c.beta_s_per_byte +
             (n - 1) / n * N * c.gamma_s_per_byte;
    default: return 0;
  }
}

}  // namespace weft::algo::ring
