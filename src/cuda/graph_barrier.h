// The barrier of a cuda_p2p group's calls captured into CUDA graphs. An eager
// call's barriers are stream memory operations carrying numbers counted when the
// call is enqueued; a graph replays the numbers it captured, so its waits would
// be met at once from the second replay on. This barrier counts on the device
// instead: each rank's stream adds one to an arrival word in its own flag page
// and waits until every peer's arrival word has reached its own. Every rank
// runs the same barriers in the same order (the graphs and eager calls of a
// communicator in the same order everywhere, as NCCL requires), so the counts
// meet. This header needs no CUDA headers.
#pragma once

#include <cstdint>

#include "weft/weft.h"

struct CUstream_st;

namespace weft::cuda {

// Words of a rank's graph area (in its flag page).
enum GraphWord : int {
  kGraphArrived = 0,    // barriers this rank's stream has reached (written by it only)
  kGraphUnblock = 1,    // non-zero: the communicator failed; this rank's waits end at once
  kGraphStuckRank = 2,  // a wait ran past its deadline: 1 + the rank it waited for
  kGraphStuckAt = 3,    // and the barrier's number
  kGraphWords = 4,
};

// Addresses as the GPU (or the stand-in driver's stream) reaches them.
struct GraphBarrier {
  uint32_t* own = nullptr;            // this rank's graph area
  const uint64_t* peers = nullptr;    // nranks addresses: each rank's graph area
  int rank = 0, nranks = 1;
  uint64_t timeout_ns = 0;            // a wait longer than this records itself and traps
};

// Enqueues one barrier kernel (one block) on `stream`; the GraphBarrier is
// passed by value. weftUnhandledCudaError if the launch failed (logged).
weftResult_t graph_barrier(const GraphBarrier& b, CUstream_st* stream);

}  // namespace weft::cuda
