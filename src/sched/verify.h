// Symbolic verifier: runs a Schedule on values instead of numbers and proves that
// it computes its collective. Each element is a (source index, set of contributing
// ranks) pair; ranks are simulated with per-pair FIFOs under the executor's rules:
// a Send never blocks and carries the value its range has when the step is reached;
// a step that writes memory an undelivered Send of the same rank still reads waits
// until the peer has received that Send (rendezvous transports; a receive takes
// its message into staging first). It rejects deadlocks, count mismatches, reads of
// unwritten data, double or mixed contributions, out-of-bounds ranges, writes to a
// buffer the rank may not write, leftover messages and wrong final results. n <= 64.
#pragma once

#include "base/status.h"
#include "sched/schedule.h"

namespace weft::sched {

// in_place: Send and Recv alias as the C API's in-place call does (allgather:
// send = recv + rank*count; reducescatter: recv = send + rank*count; otherwise the
// same memory). Returns weftInternalError naming rank, step index and the problem.
Status verify(const Schedule& schedule, bool in_place);

// Both readings; the first failure wins.
Status verify_both(const Schedule& schedule);

}  // namespace weft::sched
