// The schedule IR. An algorithm is a pure function from BuildArgs to a per-rank
// list of Steps over buffer ranges; it does no I/O. The same data is executed
// (src/exec), verified symbolically (sched/verify.h) and simulated (tune/).
//
// Matching rule: between an ordered pair of ranks (a -> b), the i-th Send step of
// a pairs with the i-th Recv/RecvReduce step of b whose peer is a; their element
// counts must be equal. Sends never block (the executor queues them), so a
// schedule is deadlock-free iff it completes when sends are buffered.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::sched {

enum class Coll : uint8_t { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll };
const char* coll_name(Coll coll);

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
};

struct Step {
  Kind kind;
  int32_t peer;  // -1 for Copy
  Range dst;     // Recv, RecvReduce, Copy
  Range src;     // Send, RecvReduce, Copy
};

struct RankPlan {
  std::vector<Step> steps;
  uint64_t scratch_count = 0;
};

// Everything a builder may depend on. Counts are in elements.
struct BuildArgs {
  Coll coll = Coll::AllReduce;
  int nranks = 1;
  uint64_t count = 0;       // per-collective meaning, as in the C API
  int root = 0;             // rooted collectives
  uint64_t slice_elems = 0; // pipeline slice size; 0 = no slicing
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

// Builds every rank's plan (for the verifier and the simulator).
Schedule build_all(const BuildArgs& args, const char* algo, BuildFn build);

}  // namespace weft::sched
