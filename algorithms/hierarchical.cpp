#include "algorithms/hierarchical.h"

#include "algorithms/ring_phases.h"

namespace weft::algo::hierarchical {

using namespace weft::sched;

namespace {
// Ranks per domain: domain_size where it cuts the node, else the whole node.
int domain_of(const BuildArgs& a) {
  return a.domain_size > 0 && a.domain_size < a.local_size ? a.domain_size : a.local_size;
}
}  // namespace

bool supports(const BuildArgs& a) {
  return a.local_size > 0 && a.nranks % a.local_size == 0 &&
         (a.domain_size <= 0 || a.local_size % a.domain_size == 0);
}

// D ranks per domain, K = L / D domains per node of L ranks, M = n / L nodes;
// rank r = (node * K + k) * D + d.
//   1. ring reduce-scatter over the domain's D ranks: d ends with part (d+1) % D
//      of the vector, summed over the domain;
//   2. ring reduce-scatter of that part over the K ranks with the same d, one per
//      domain of the node: k ends with sub-part (k+1) % K, summed over the node;
//   3. ring all-reduce of the sub-part over the M ranks with the same (k, d), one
//      per node;
//   4, 5. ring all-gathers across the node's domains, then inside the domain.
// With one domain per node (K = 1) steps 2 and 4 vanish: the two-level form.
//   T = 2(D-1)(alpha + N/D beta) + (D-1) N/D gamma                   (in a domain)
//     + 2(K-1)(alpha + N/(DK) beta) + (K-1) N/(DK) gamma             (across domains)
//     + 2(M-1)(alpha + N/(LM) beta) + (M-1) N/(LM) gamma             (across nodes)
RankPlan allreduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  if (n == 1 || !supports(a)) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  const int L = a.local_size, D = domain_of(a), K = L / D, M = n / L;
  const int node = r / L, k = r % L / D, d = r % D;
  std::vector<int> domain, across_domains, across_nodes;
  for (int i = 0; i < D; ++i) domain.push_back(node * L + k * D + i);
  for (int i = 0; i < K; ++i) across_domains.push_back(node * L + i * D + d);
  for (int i = 0; i < M; ++i) across_nodes.push_back(i * L + k * D + d);
  const Part all{0, a.count};
  // A rank alone at a level never reduces there: its input is still in Send.
  Buf input = Buf::Send;
  if (D > 1) {
    ring_reduce_scatter(b, domain, d, all, Buf::Send, a.slice_elems);
    input = Buf::Recv;
  }
  const Part in_domain = even_part(a.count, static_cast<uint64_t>(D), static_cast<uint64_t>(mod(d + 1, D)));
  if (K > 1) {
    ring_reduce_scatter(b, across_domains, k, in_domain, input, a.slice_elems);
    input = Buf::Recv;
  }
  Part in_node = even_part(in_domain.count, static_cast<uint64_t>(K), static_cast<uint64_t>(mod(k + 1, K)));
  in_node.offset += in_domain.offset;
  if (M > 1) {
    ring_reduce_scatter(b, across_nodes, node, in_node, input, a.slice_elems);
    ring_all_gather(b, across_nodes, node, in_node, a.slice_elems);
  }
  ring_all_gather(b, across_domains, k, in_domain, a.slice_elems);
  ring_all_gather(b, domain, d, all, a.slice_elems);
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1 || !supports(a)) return 0;
  const double L = a.local_size, D = domain_of(a), K = L / D, M = a.nranks / a.local_size;
  const double N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  const double al = c.alpha_s, be = c.beta_s_per_byte, ga = c.gamma_s_per_byte;
  auto level = [&](double m, double bytes) { return 2 * (m - 1) * (al + bytes / m * be) + (m - 1) * bytes / m * ga; };
  return level(D, N) + level(K, N / D) + level(M, N / L);
}

}  // namespace weft::algo::hierarchical
