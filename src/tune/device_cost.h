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
//
// A device collective on M hosts of L ranks each (consecutive ranks per host)
// has two plans, priced whole per call (comm/device_levels.cpp picks the cheaper;
// WEFT_EXPLAIN shows both). `levels` goes over cuda_p2p within each host and is
// staged only for what crosses hosts, among the M ranks of one local rank;
// `staged` copies the call through pinned host memory and runs it as a host
// collective of all L M ranks. copies(b) = 2 alpha_stg + b beta_stg, b the bytes
// the rank's host call sends and receives; host(...) the host tuner's predicted
// time for that call (its model, the same on every rank, so every rank plans
// alike):
//   staged = copies + host(the call, L M ranks)
//   levels = within hosts (cuda_p2p, the formulas above, n = L) + copies + host(across, M ranks)
// with, per collective (N as above for the whole communicator):
//   all-reduce      reduce-scatter of N/L, then all-gather of N/L   across: all-reduce of N/L
//   broadcast       broadcast of N                                  across: broadcast of N
//   reduce          reduce of N                                     across: reduce of N
//   all-gather      all-gather of M N (each host's M blocks)        across: all-gather of N
//   reduce-scatter  reduce-scatter of M N                           across: reduce-scatter of N
//   all-to-all      all-to-all of M N (transposing M blocks)        across: all-to-all of L N
// So levels pays two or one cuda_p2p barriers more and stages 1/L of an
// all-reduce's bytes: staged wins small calls where barriers cost more than the
// host call's shorter steps, levels large ones.
//
// A levels all-reduce may also go in R rounds of N/R whose levels overlap: the
// stream does round j+1's reduce-scatter within hosts and copy into pinned memory
// while the host engine runs round j across hosts, then copies round j back and
// all-gathers it. Two resources in turn, the stream (s: a round's work within
// hosts and its copies) and the engine (e: its call across hosts), each priced
// at N/R as above:
//   rounds(R) = s + e + (R - 1) max(s, e)
// which is levels at R = 1; R = 2, 4 or 8 is taken where 10% faster than that.
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

// The cuda_p2p part of the levels plan, within each host (the table above).
DeviceTerms levels_local_cost(sched::Coll coll, int local_ranks, int hosts, uint64_t bytes, uint64_t round_bytes,
                              LinkClass cls, const algo::LinkCost& c);
// The elements of the call across hosts, for a call of `count` elements.
uint64_t levels_cross_count(sched::Coll coll, int local_ranks, uint64_t count);
// copies(moved) through pinned host memory.
double staging_copies_cost(uint64_t moved_bytes, const algo::LinkCost& stg);
// rounds(R) above: s, the stream's part of a round; e, the engine's.
double level_rounds_cost(double s, double e, int rounds);

// Both plans of one call, their parts in seconds.
struct DevicePlanCost {
  DeviceTerms local;               // levels: cuda_p2p within hosts
  double cross_copies = 0, cross_host = 0;  // levels: copies, host call across hosts
  double copies = 0, host = 0;     // staged
  std::string cross_algo, host_algo;  // the host tuner's model picks
  // An all-reduce's best R >= 2 overlapped rounds (0: none priced), one round's
  // parts, and whether the levels plan goes in them.
  int rounds = 0;
  double round_local = 0, round_copies = 0, round_cross = 0;
  bool in_rounds = false;
  bool rounds_forced = false;  // WEFT_DEVICE_LEVEL_ROUNDS
  double levels() const { return local.total() + cross_copies + cross_host; }
  double overlapped() const { return level_rounds_cost(round_local + round_copies, round_cross, rounds); }
  double levels_plan() const { return in_rounds ? overlapped() : levels(); }
  double staged() const { return copies + host; }
};
// WEFT_EXPLAIN's text for one call that could go either way; `forced` >= 0 is
// WEFT_DEVICE_LEVELS, which then decides.
std::string explain_device_plan(sched::Coll coll, uint64_t bytes, int local_ranks, int hosts, LinkClass cls,
                                const DevicePlanCost& cost, bool levels, int forced);

// WEFT_EXPLAIN's text for one such call: the constants, both variants' terms
// (terms[0] one-shot, terms[1] two-shot) and the pick; `forced` >= 0 is
// WEFT_P2P_ONESHOT_BYTES, which then decides; `windows`: "" for the buffers, else
// how the call lies in symmetric windows (and what that decides).
std::string explain_p2p_allreduce(int nranks, uint64_t bytes, LinkClass cls, const algo::LinkCost& c,
                                  const DeviceTerms terms[2], bool oneshot, int64_t forced,
                                  const std::string& windows = "");

}  // namespace weft::tune
