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
//
// The other collectives over cuda_p2p, for weftGroupSimulateEnd's estimates. N:
// the bytes each rank sends (all-gather), receives (reduce-scatter), of one block
// (all-to-all), or of the vector (broadcast, reduce); B: the buffer. One barrier
// per round of the buffer (R alpha), or on windows one before and one after
// (2 alpha); the copy in left out as above:
//   all-gather      R = ceil(N / B)     (n-1) N beta                  each reads n-1 pieces
//   reduce-scatter  R = ceil(n N / B)   (n-1) N beta + (n-1) N gamma  each reduces its block from n
//   all-to-all      R = ceil(n N / B)   (n-1) N beta                  each reads its block from n-1
//   broadcast       R = ceil(N / B)     N beta                        the others read the root's
//   reduce          R = ceil(N / B)     (n-1) N beta + (n-1) N gamma  the root reduces all n
// Ranks sharing one GPU (gpu) count beta and gamma once per rank doing the same
// at once: n, n - 1 broadcast's readers, 1 reduce's root.
#pragma once

#include <cstdint>
#include <string>

#include "algorithms/registry.h"
#include "sched/schedule.h"
#include "tune/table.h"

namespace weft::tune {

struct DeviceTerms {
  double latency = 0, bandwidth = 0, reduction = 0;
  double total() const { return latency + bandwidth + reduction; }
};

DeviceTerms p2p_allreduce_cost(bool oneshot, int nranks, uint64_t bytes, uint64_t round_bytes, LinkClass cls,
                               const algo::LinkCost& c, bool windows = false);

DeviceTerms p2p_collective_cost(sched::Coll coll, int nranks, uint64_t bytes, uint64_t round_bytes, LinkClass cls,
                                const algo::LinkCost& c, bool windows);

// WEFT_EXPLAIN's text for one such call: the constants, both variants' terms
// (terms[0] one-shot, terms[1] two-shot) and the pick; `forced` >= 0 is
// WEFT_P2P_ONESHOT_BYTES, which then decides; `windows`: "" for the buffers, else
// how the call lies in symmetric windows (and what that decides).
std::string explain_p2p_allreduce(int nranks, uint64_t bytes, LinkClass cls, const algo::LinkCost& c,
                                  const DeviceTerms terms[2], bool oneshot, int64_t forced,
                                  const std::string& windows = "");

}  // namespace weft::tune
