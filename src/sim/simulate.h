// Runs a schedule on a Fabric in simulated time, step by step, with the executor's
// rules (sched/schedule.h): a rank runs its steps in order; a Send never blocks and
// holds the sender's port, the receiver's port and any shared port it crosses
// (fabric.h) for alpha + bytes x beta of its level, or longer where a shared lane is
// slower; a Recv waits for its message; a RecvReduce then reduces it (bytes x gamma
// of the message's level) and a local Reduce costs bytes x gamma of the Domain
// level; a Copy costs bytes x copy_s_per_byte. Ports are claimed in simulated-time
// order, so messages meeting on a port queue in the order they were sent. Pipeline
// slices are the builders' own steps, so their overlap is simulated, not assumed.
//
// On a flat fabric (every pair one level, no shared port) without slices this
// gives exactly the closed-form cost above each builder wherever the formula is the
// schedule's critical path (tests/unit/sim). Not modelled: the executor's wait before
// overwriting a range an undelivered Send still reads, eager versus rendezvous
// protocols, and CPU time of the posting itself.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "sched/schedule.h"
#include "sim/fabric.h"

namespace weft::sim {

struct Result {
  double seconds = 0;               // when the last rank finished its last step
  std::vector<double> rank_seconds; // per rank
  uint64_t messages = 0;
  std::array<uint64_t, kLevels> bytes{};  // bytes sent per level
};

// weftInvalidArgument if the schedule's rank count differs from the fabric's;
// weftInternalError naming the ranks on a deadlock or a send/receive count mismatch.
Status simulate(const sched::Schedule& s, const Fabric& f, size_t elem_size, Result* out);

}  // namespace weft::sim
