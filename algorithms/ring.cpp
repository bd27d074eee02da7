#include "algorithms/ring.h"

#include "sched/build_util.h"

namespace weft::algo::ring {

using namespace weft::sched;

// Notation for the cost formulas: n ranks, N bytes of the per-rank vector
// (count * elem_size; for allgather/reducescatter the per-rank block), k pipeline
// slice rounds, alpha/beta/gamma per message / byte sent / byte reduced.

namespace {
// Slice rounds of the all-reduce ring: chunks are count/n elements (rounded up),
// cut into slices of slice_elems; every round moves one slice of every chunk.
uint64_t allreduce_rounds(const BuildArgs& a) {
  return num_slices(ceil_div(a.count, static_cast<uint64_t>(a.nranks)), a.slice_elems);
}
}  // namespace

// All-reduce = reduce-scatter then all-gather over n chunks, each cut into slices
// (rounds) so the executor pipelines slice j+1 behind slice j.
//   Reduce-scatter step s: send chunk r-s, receive chunk r-s-1 and reduce it with
//   our own input; after n-1 steps rank r holds chunk r+1 fully reduced.
//   All-gather step s: send chunk r+1-s, receive chunk r-s.
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
  const uint64_t k = allreduce_rounds(a);
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

// Broadcast as a pipelined chain root -> root+1 -> ... -> root-1: each rank
// forwards slice j while slice j+1 arrives.
//   T = (n + k - 2)(alpha + N/k beta)
RankPlan broadcast(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks, v = mod(r - a.root, n), next = mod(r + 1, n), prev = mod(r - 1, n);
  if (v == 0) b.copy(recv_buf(0, a.count), send_buf(0, a.count));
  const uint64_t k = num_slices(a.count, a.slice_elems);
  for (uint64_t j = 0; j < k && n > 1; ++j) {
    const Part p = slice_of({0, a.count}, a.slice_elems, j);
    if (v != 0) b.recv(prev, recv_buf(p.offset, p.count));
    if (v != n - 1) b.send(next, v == 0 ? send_buf(p.offset, p.count) : recv_buf(p.offset, p.count));
  }
  return b.take();
}

// Reduce as a pipelined chain root+1 -> root+2 -> ... -> root-1 -> root; each rank
// adds its input to the partial sum passing through. Non-roots keep the partial sum
// in scratch: in a reduce only the root has a receive buffer.
//   T = (n + k - 2)(alpha + N/k (beta + gamma))
RankPlan reduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks, v = mod(r - a.root, n), next = mod(r + 1, n), prev = mod(r - 1, n);
  if (n == 1) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  if (v >= 2) b.need_scratch(a.count);
  const uint64_t k = num_slices(a.count, a.slice_elems);
  for (uint64_t j = 0; j < k; ++j) {
    const Part p = slice_of({0, a.count}, a.slice_elems, j);
    if (v == 0) {
      b.recv_reduce(prev, recv_buf(p.offset, p.count), send_buf(p.offset, p.count));
    } else if (v == 1) {
      b.send(next, send_buf(p.offset, p.count));
    } else {
      b.recv_reduce(prev, scratch_buf(p.offset, p.count), send_buf(p.offset, p.count));
      b.send(next, scratch_buf(p.offset, p.count));
    }
  }
  return b.take();
}

// All-gather: block b is rank b's input; step s sends block r-s (our own input at
// s = 0) and receives block r-s-1.
//   T = (n-1)k alpha + (n-1) N beta
RankPlan allgather(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks, next = mod(r + 1, n), prev = mod(r - 1, n);
  const uint64_t c = a.count;
  b.copy(recv_buf(static_cast<uint64_t>(r) * c, c), send_buf(0, c));
  const uint64_t k = num_slices(c, a.slice_elems);
  for (uint64_t j = 0; j < k; ++j) {
    const Part p = slice_of({0, c}, a.slice_elems, j);
    for (int s = 0; s < n - 1; ++s) {
      const uint64_t out = static_cast<uint64_t>(mod(r - s, n)) * c, in = static_cast<uint64_t>(mod(r - s - 1, n)) * c;
      b.send(next, s == 0 ? send_buf(p.offset, p.count) : recv_buf(out + p.offset, p.count));
      b.recv(prev, recv_buf(in + p.offset, p.count));
    }
  }
  return b.take();
}

// Reduce-scatter: block b of every input is reduced onto rank b. Step s sends the
// partial sum of block r-s-1 and receives block r-s-2, adding our input; the last
// step (s = n-2) lands block r in Recv. Partial sums live in two alternating
// scratch slots so a slot is not rewritten right after it was sent.
//   T = (n-1)k alpha + (n-1) N (beta + gamma)
RankPlan reducescatter(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks, next = mod(r + 1, n), prev = mod(r - 1, n);
  const uint64_t c = a.count;
  if (n == 1) {
    b.copy(recv_buf(0, c), send_buf(0, c));
    return b.take();
  }
  if (n > 2) b.need_scratch(2 * c);
  const uint64_t k = num_slices(c, a.slice_elems);
  auto block = [&](int i) { return static_cast<uint64_t>(mod(i, n)) * c; };
  for (uint64_t j = 0; j < k; ++j) {
    const Part p = slice_of({0, c}, a.slice_elems, j);
    for (int s = 0; s < n - 1; ++s) {
      const Range prev_acc = scratch_buf(static_cast<uint64_t>((s + 1) % 2) * c + p.offset, p.count);
      b.send(next, s == 0 ? send_buf(block(r - s - 1) + p.offset, p.count) : prev_acc);
      const Range acc = s == n - 2 ? recv_buf(p.offset, p.count)
                                   : scratch_buf(static_cast<uint64_t>(s % 2) * c + p.offset, p.count);
      b.recv_reduce(prev, acc, send_buf(block(r - s - 2) + p.offset, p.count));
    }
  }
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1) return 0;
  const double n = a.nranks, N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  const double al = c.alpha_s, be = c.beta_s_per_byte, ga = c.gamma_s_per_byte;
  const double k = static_cast<double>(std::max<uint64_t>(1, num_slices(a.count, a.slice_elems)));
  switch (a.coll) {
    case Coll::AllReduce: {
      const double kr = static_cast<double>(std::max<uint64_t>(1, allreduce_rounds(a)));
      return 2 * (n - 1) * kr * al + 2 * (n - 1) / n * N * be + (n - 1) / n * N * ga;
    }
    case Coll::Broadcast: return (n + k - 2) * (al + N / k * be);
    case Coll::Reduce: return (n + k - 2) * (al + N / k * (be + ga));
    case Coll::AllGather: return (n - 1) * k * al + (n - 1) * N * be;
    case Coll::ReduceScatter: return (n - 1) * k * al + (n - 1) * N * (be + ga);
    case Coll::AllToAll: return 0;  // no ring all-to-all
  }
  return 0;
}

}  // namespace weft::algo::ring
