// The cost model of cuda_p2p's all-reduce (comm/device_p2p.cpp), by which the
// communicator chooses one-shot or two-shot per call, with the constants of the
// group's link class (table.h: gpu, nvl, p2p, stg). Rounds of up to one buffer
// (R = ceil(N / buffer bytes)); every rank first copies its input into its own
// buffer, the same in both and left out:
//   one-shot: R alpha + (n-1) N beta + (n-1) N gamma        (every rank reduces all n)
//   two-shot: 2R alpha + 2 (n-1)/n N beta + (n-1)/n N gamma  (a slice each, then gather)
// Ranks sharing one GPU (gpu) share its memory: their n reads and reductions run
// at once through it, so beta and gamma count n times. Two ranks read as many bytes
// either way, so one-shot wins until two-shot's halved reduction pays for its
// second barrier. On symmetric windows (comm/device_p2p_windows.cpp) there is
// one round and no copy in, and a last barrier keeps the windows until every
// peer has read them: 2 alpha one-shot, 3 alpha two-shot.
#pragma once

#include <cstdint>
#include <string>

#include "algorithms/registry.h"
#include "tune/table.h"

namespace weft::tune {

struct DeviceTerms {
  double latency = 0, bandwidth = 0, reduction = 0;
  double total() const { return latency + bandwidth + reduction; }
};

DeviceTerms p2p_allreduce_cost(bool oneshot, int nranks, uint64_t bytes, uint64_t round_bytes, LinkClass cls,
                               const algo::LinkCost& c, bool windows = false);

// WEFT_EXPLAIN's text for one such call: the constants, both variants' terms
// (terms[0] one-shot, terms[1] two-shot) and the pick; `forced` >= 0 is
// WEFT_P2P_ONESHOT_BYTES, which then decides; `windows`: "" for the buffers, else
// how the call lies in symmetric windows (and what that decides).
std::string explain_p2p_allreduce(int nranks, uint64_t bytes, LinkClass cls, const algo::LinkCost& c,
                                  const DeviceTerms terms[2], bool oneshot, int64_t forced,
                                  const std::string& windows = "");

}  // namespace weft::tune
