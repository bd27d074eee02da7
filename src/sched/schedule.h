// The schedule IR. An algorithm is a pure function from BuildArgs to a per-rank
// list of Steps over buffer ranges; it does no I/O. The same data is executed
// (src/exec), verified symbolically (sched/verify.h) and simulated (tune/).
//
// Matching rule: between an ordered pair of ranks (a -> b), the i-th Send step of
// a pairs with the i-th Recv/RecvReduce step of b whose peer is a; their element
// counts must be equal. Sends never block (the executor queues them); receives
// wait for their message, and local writes may wait as described next.
//
// A Send carries the value its src range holds when the step is reached; later
// steps of the same rank may overwrite that range (ring all-reduce in place does).
// The executor makes such a write wait until the peer has received the send (a
// receive takes its message into staging first); the verifier models exactly that,
// so a schedule it accepts cannot deadlock on it.
//
// Zero-length steps are never emitted. A Copy whose src and dst are the same memory
// (in-place calls) is a no-op the executor skips.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft::sched {

enum class Coll : uint8_t { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll };
const char* coll_name(Coll coll);
// Collectives whose ranks may be relabeled: every rank's part is alike (all-reduce)
// or only the root stands out (broadcast, reduce; relabeled with the others). A
// schedule built for ranks in another order then runs correctly once its peers
// are mapped back (relabel()). Not the gathers and scatters, whose blocks sit at
// their ranks' offsets.
bool relabelable(Coll coll);

// Per-rank buffers. Send holds the input, Recv the output; for an in-place call
// they are the same memory (the executor aliases them, the verifier checks both
// readings). Scratch is executor-owned, RankPlan::scratch_count elements.
enum class Buf : uint8_t { Send, Recv, Scratch };

struct Range {
  Buf buf;
  uint64_t offset;  // in elements
  uint64_t count;   // in elements
};

enum class Kind : uint8_t {
  Send,        // send src to peer
  Recv,        // dst = incoming from peer
  RecvReduce,  // dst = src op incoming from peer (src may equal dst)
  Copy,        // dst = src (local)
  Reduce,      // dst = dst op src (local; peer -1). Lets a rank fold its own input
               // into a sum of received data in a fixed order (oneshot's rank-order
               // sum). Appended after the first four so their values stay put.
};
const char* kind_name(Kind kind);
const char* buf_name(Buf buf);

struct Step {
  Kind kind;
  int32_t peer;  // -1 for Copy and Reduce
  Range dst;     // Recv, RecvReduce, Copy, Reduce
  Range src;     // Send, RecvReduce, Copy, Reduce
};
// "RecvReduce from 3 dst=Recv[8,+4) src=Send[8,+4)": for logs and verifier errors.
std::string to_string(const Step& step);

struct RankPlan {
  std::vector<Step> steps;
  uint64_t scratch_count = 0;
};

// How one level of a hierarchical schedule runs: ring reduce-scatter and
// all-gather, recursive halving and doubling (as the flat rabenseifner), or
// recursive doubling of the whole region (as recdoubling; only the outermost level
// with more than one rank, where no other level runs inside it).
enum class LevelAlgo : uint8_t { Ring = 0, Rabenseifner, RecDoubling };
const char* level_algo_name(LevelAlgo algo);
bool parse_level_algo(std::string_view name, LevelAlgo* out);
constexpr int kLevels = 3;  // a NUMA domain, across a host's domains, across hosts

// Everything a builder may depend on. Counts are in elements.
struct BuildArgs {
  Coll coll = Coll::AllReduce;
  int nranks = 1;
  uint64_t count = 0;       // per-collective meaning, as in the C API
  int root = 0;             // rooted collectives
  uint64_t slice_elems = 0; // pipeline slice size; 0 = no slicing
  int local_size = 0;       // ranks per node, consecutive ranks sharing a node
                            // (hierarchical builders); 0 = unknown
  int domain_size = 0;      // ranks per NUMA domain (or GPU island), consecutive,
                            // dividing local_size; 0 = one domain per node
  // Hierarchical's algorithm per level (domain, across domains, across nodes),
  // which the tuner chooses by each level's own size (Tuner::tailored).
  std::array<LevelAlgo, kLevels> levels{};
  // Hierarchical: rounds of the vector whose levels overlap (round j's phase q
  // beside round j+1's phase q-1); 0 or 1: the levels one after another, sliced.
  uint32_t pipeline = 0;
};

// Element counts of each rank's Send and Recv buffers for a collective call.
uint64_t send_count(const BuildArgs& args);
uint64_t recv_count(const BuildArgs& args);

using BuildFn = RankPlan (*)(const BuildArgs& args, int rank);

struct Schedule {
  BuildArgs args;
  std::string algo;
  std::vector<RankPlan> ranks;  // index = rank
};

// A plan built for position `pos` of `order` (order[pos] = the rank there) with
// its peers turned into the ranks at those positions.
void relabel(RankPlan* plan, const std::vector<int>& order);

// Builds every rank's plan (for the verifier and the simulator).
Schedule build_all(const BuildArgs& args, const char* algo, BuildFn build);

}  // namespace weft::sched
