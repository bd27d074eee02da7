#include "algorithms/hierarchical.h"

#include "algorithms/ring_phases.h"

namespace weft::algo::hierarchical {

using namespace weft::sched;

bool supports(const BuildArgs& a) { return a.local_size > 0 && a.nranks % a.local_size == 0; }

// L ranks per node, M = n / L nodes, rank r = node * L + l.
//   1. ring reduce-scatter over the node's L ranks: l ends with part (l+1) % L of
//      the vector, summed over the node;
//   2. ring all-reduce (reduce-scatter + all-gather) of that part over the M
//      ranks with the same l, one per node;
//   3. ring all-gather over the node.
//   T = 2(L-1)(alpha + N/L beta) + (L-1) N/L gamma            (intra-node)
//     + 2(M-1)(alpha + N/(LM) beta) + (M-1) N/(LM) gamma      (inter-node)
RankPlan allreduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  if (n == 1 || !supports(a)) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  const int L = a.local_size, M = n / L, node = r / L, l = r % L;
  std::vector<int> local, cross;
  for (int i = 0; i < L; ++i) local.push_back(node * L + i);
  for (int i = 0; i < M; ++i) cross.push_back(i * L + l);
  const Part all{0, a.count};
  // A single-rank node never reduces locally: its input is still in Send.
  Buf input = Buf::Send;
  if (L > 1) {
    ring_reduce_scatter(b, local, l, all, Buf::Send, a.slice_elems);
    input = Buf::Recv;
  }
  const Part mine = even_part(a.count, static_cast<uint64_t>(L), static_cast<uint64_t>(mod(l + 1, L)));
  if (M > 1) {
    ring_reduce_scatter(b, cross, node, mine, input, a.slice_elems);
    ring_all_gather(b, cross, node, mine, a.slice_elems);
  }
  ring_all_gather(b, local, l, all, a.slice_elems);
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || !supports(a)) return 0;
  const double L = a.local_size, M = a.nranks / a.local_size;
  const double N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  const double al = c.alpha_s, be = c.beta_s_per_byte, ga = c.gamma_s_per_byte;
  return 2 * (L - 1) * (al + N / L * be) + (L - 1) * N / L * ga + 2 * (M - 1) * (al + N / (L * M) * be) +
         (M - 1) * N / (L * M) * ga;
}

}  // namespace weft::algo::hierarchical
