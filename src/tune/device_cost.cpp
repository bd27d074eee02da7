#include "tune/device_cost.h"

namespace weft::tune {

DeviceTerms p2p_allreduce_cost(bool oneshot, int nranks, uint64_t bytes, uint64_t round_bytes, LinkClass cls,
                               const algo::LinkCost& c) {
  DeviceTerms t;
  if (nranks <= 1 || bytes == 0) return t;
  const double n = nranks, N = static_cast<double>(bytes);
  const double rounds = round_bytes == 0 ? 1 : static_cast<double>((bytes + round_bytes - 1) / round_bytes);
  const double share = cls == LinkClass::Gpu ? n : 1;
  const double moved = oneshot ? (n - 1) * N : 2 * (n - 1) / n * N;
  const double reduced = oneshot ? (n - 1) * N : (n - 1) / n * N;
  t.latency = (oneshot ? 1 : 2) * rounds * c.alpha_s;
  t.bandwidth = moved * share * c.beta_s_per_byte;
  t.reduction = reduced * share * c.gamma_s_per_byte;
  return t;
}

}  // namespace weft::tune
