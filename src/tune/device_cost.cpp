#include "tune/device_cost.h"

#include <algorithm>
#include <cstdio>

#include "tune/tuner.h"

namespace weft::tune {

DeviceTerms p2p_allreduce_cost(bool oneshot, int nranks, uint64_t bytes, uint64_t round_bytes, LinkClass cls,
                               const algo::LinkCost& c, bool windows) {
  DeviceTerms t;
  if (nranks <= 1 || bytes == 0) return t;
  const double n = nranks, N = static_cast<double>(bytes);
  const double rounds =
      windows || round_bytes == 0 ? 1 : static_cast<double>((bytes + round_bytes - 1) / round_bytes);
  const double share = cls == LinkClass::Gpu ? n : 1;
  const double moved = oneshot ? (n - 1) * N : 2 * (n - 1) / n * N;
  const double reduced = oneshot ? (n - 1) * N : (n - 1) / n * N;
  t.latency = ((oneshot ? 1 : 2) * rounds + (windows ? 1 : 0)) * c.alpha_s;
  t.bandwidth = moved * share * c.beta_s_per_byte;
  t.reduction = reduced * share * c.gamma_s_per_byte;
  return t;
}

DeviceTerms p2p_collective_cost(sched::Coll coll, int nranks, uint64_t bytes, uint64_t round_bytes, LinkClass cls,
                                const algo::LinkCost& c, bool windows) {
  DeviceTerms t;
  if (nranks <= 1 || bytes == 0) return t;
  const double n = nranks, N = static_cast<double>(bytes);
  const bool blocks = coll == sched::Coll::ReduceScatter || coll == sched::Coll::AllToAll;
  const uint64_t staged = blocks ? static_cast<uint64_t>(nranks) * bytes : bytes;  // bytes through the buffers
  const double rounds = round_bytes == 0 ? 1 : static_cast<double>((staged + round_bytes - 1) / round_bytes);
  const bool reduces = coll == sched::Coll::ReduceScatter || coll == sched::Coll::Reduce;
  const double moved = coll == sched::Coll::Broadcast ? N : (n - 1) * N;
  const double at_once = cls != LinkClass::Gpu               ? 1
                         : coll == sched::Coll::Broadcast ? n - 1
                         : coll == sched::Coll::Reduce    ? 1
                                                          : n;
  t.latency = (windows ? 2 : rounds) * c.alpha_s;
  t.bandwidth = moved * at_once * c.beta_s_per_byte;
  t.reduction = reduces ? (n - 1) * N * at_once * c.gamma_s_per_byte : 0;
  return t;
}

DeviceTerms levels_local_cost(sched::Coll coll, int local_ranks, int hosts, uint64_t bytes, uint64_t round_bytes,
                              LinkClass cls, const algo::LinkCost& c) {
  const uint64_t L = static_cast<uint64_t>(local_ranks), M = static_cast<uint64_t>(hosts);
  switch (coll) {
    case sched::Coll::AllReduce: {
      const DeviceTerms rs =
          p2p_collective_cost(sched::Coll::ReduceScatter, local_ranks, bytes / L, round_bytes, cls, c, false);
      const DeviceTerms ag =
          p2p_collective_cost(sched::Coll::AllGather, local_ranks, bytes / L, round_bytes, cls, c, false);
      return {rs.latency + ag.latency, rs.bandwidth + ag.bandwidth, rs.reduction + ag.reduction};
    }
    case sched::Coll::Broadcast:
    case sched::Coll::Reduce: return p2p_collective_cost(coll, local_ranks, bytes, round_bytes, cls, c, false);
    case sched::Coll::AllGather:
    case sched::Coll::ReduceScatter:
    case sched::Coll::AllToAll: return p2p_collective_cost(coll, local_ranks, M * bytes, round_bytes, cls, c, false);
  }
  return {};
}

uint64_t levels_cross_count(sched::Coll coll, int local_ranks, uint64_t count) {
  const uint64_t L = static_cast<uint64_t>(local_ranks);
  if (coll == sched::Coll::AllReduce) return count / L;
  if (coll == sched::Coll::AllToAll) return count * L;
  return count;
}

double staging_copies_cost(uint64_t moved_bytes, const algo::LinkCost& stg) {
  return 2 * stg.alpha_s + static_cast<double>(moved_bytes) * stg.beta_s_per_byte;
}

double level_rounds_cost(double s, double e, int rounds) {
  return s + e + static_cast<double>(std::max(rounds, 1) - 1) * std::max(s, e);
}

std::string explain_device_plan(sched::Coll coll, uint64_t bytes, int local_ranks, int hosts, LinkClass cls,
                                const DevicePlanCost& cost, bool levels, int forced) {
  const std::string decides = forced >= 0 ? ", WEFT_DEVICE_LEVELS=" + std::to_string(forced) + " decides" : "";
  char line[512];
  std::snprintf(line, sizeof(line),
                "weft explain: %s %llu B (size class %d) on device memory, %d hosts x %d ranks%s:\n",
                sched::coll_name(coll), static_cast<unsigned long long>(bytes), size_class(bytes), hosts, local_ranks,
                decides.c_str());
  std::string out = line;
  std::snprintf(line, sizeof(line),
                "weft explain:   %-8s %12.3f us = within hosts over cuda_p2p (link class %s) %.3f + copies %.3f + "
                "across hosts (%s, %d ranks) %.3f%s\n",
                "levels", cost.levels() * 1e6, link_class_name(cls), cost.local.total() * 1e6,
                cost.cross_copies * 1e6, cost.cross_algo.c_str(), hosts, cost.cross_host * 1e6,
                levels && !cost.in_rounds ? "  <- pick" : "");
  out += line;
  if (cost.rounds >= 2) {
    std::snprintf(line, sizeof(line),
                  "weft explain:   %-8s %12.3f us = %d overlapped rounds of levels, each within hosts %.3f + copies "
                  "%.3f (the stream) and across hosts %.3f (the engine): s + e + (R-1) max(s, e)%s\n",
                  "rounds", cost.overlapped() * 1e6, cost.rounds, cost.round_local * 1e6, cost.round_copies * 1e6,
                  cost.round_cross * 1e6,
                  cost.rounds_forced ? (levels ? ", WEFT_DEVICE_LEVEL_ROUNDS decides  <- pick"
                                               : ", WEFT_DEVICE_LEVEL_ROUNDS decides")
                  : !cost.in_rounds  ? "  (not taken: 10% faster than one round needed)"
                  : levels           ? "  <- pick"
                                     : "");
    out += line;
  }
  std::snprintf(line, sizeof(line), "weft explain:   %-8s %12.3f us = copies %.3f + host call (%s, %d ranks) %.3f%s\n",
                "staged", cost.staged() * 1e6, cost.copies * 1e6, cost.host_algo.c_str(), hosts * local_ranks,
                cost.host * 1e6, levels ? "" : "  <- pick");
  out += line;
  return out;
}

std::string explain_p2p_allreduce(int nranks, uint64_t bytes, LinkClass cls, const algo::LinkCost& c,
                                  const DeviceTerms terms[2], bool oneshot, int64_t forced,
                                  const std::string& windows) {
  std::string decides;
  if (forced >= 0) decides = ", WEFT_P2P_ONESHOT_BYTES=" + std::to_string(forced) + " decides";
  if (!windows.empty()) decides += ", " + windows;
  char line[400];
  std::snprintf(line, sizeof(line),
                "weft explain: allreduce %llu B (size class %d) on device memory, %d ranks over cuda_p2p, link "
                "class %s (alpha %.3g us, beta %.3g ns/B, gamma %.3g ns/B)%s:\n",
                static_cast<unsigned long long>(bytes), size_class(bytes), nranks, link_class_name(cls),
                c.alpha_s * 1e6, c.beta_s_per_byte * 1e9, c.gamma_s_per_byte * 1e9, decides.c_str());
  std::string out = line;
  for (int v = 0; v < 2; ++v) {
    std::snprintf(line, sizeof(line), "weft explain:   %-22s %10.3f us = latency %.3f + bandwidth %.3f + reduction %.3f%s\n",
                  v == 0 ? "oneshot" : "twoshot", terms[v].total() * 1e6, terms[v].latency * 1e6,
                  terms[v].bandwidth * 1e6, terms[v].reduction * 1e6, (v == 0) == oneshot ? "  <- pick" : "");
    out += line;
  }
  return out;
}

}  // namespace weft::tune
