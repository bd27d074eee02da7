#include "algorithms/reducescatter_gather.h"

#include "algorithms/ring_phases.h"

namespace weft::algo::reducescatter_gather {

using namespace weft::sched;

// Ring over relative ranks v = (rank - root) mod n. After the reduce-scatter,
// v holds part (v+1) % n of the sum: the root in Recv, the others in scratch
// (non-roots have no receive buffer in a reduce). Each non-root then sends its
// part to the root, which receives it in place.
//   T = (n-1) k alpha + (n-1)/n N (beta + gamma) + (n-1) alpha + (n-1)/n N beta
RankPlan reduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks, v = mod(r - a.root, n);
  const uint64_t un = static_cast<uint64_t>(n);
  if (n == 1) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  std::vector<int> ring;
  for (int i = 0; i < n; ++i) ring.push_back(mod(a.root + i, n));
  const Buf acc = v == 0 ? Buf::Recv : Buf::Scratch;
  if (v != 0) b.need_scratch(a.count);
  ring_reduce_scatter(b, ring, v, {0, a.count}, Buf::Send, a.slice_elems, acc);
  auto part = [&](int i) { return even_part(a.count, un, static_cast<uint64_t>(mod(i, n))); };
  if (v != 0) {
    const Part p = part(v + 1);
    b.send(a.root, scratch_buf(p.offset, p.count));
  } else {
    for (int w = 1; w < n; ++w) {
      const Part p = part(w + 1);
      b.recv(mod(a.root + w, n), recv_buf(p.offset, p.count));
    }
  }
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || a.coll != Coll::Reduce) return 0;
  const double n = a.nranks, N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  const uint64_t chunk = (a.count + static_cast<uint64_t>(a.nranks) - 1) / static_cast<uint64_t>(a.nranks);
  const double k = static_cast<double>(std::max<uint64_t>(1, num_slices(chunk, a.slice_elems)));
  const double frac = (n - 1) / n;
  return (n - 1) * k * c.alpha_s + frac * N * (c.beta_s_per_byte + c.gamma_s_per_byte) + (n - 1) * c.alpha_s +
         frac * N * c.beta_s_per_byte;
}

}  // namespace weft::algo::reducescatter_gather
