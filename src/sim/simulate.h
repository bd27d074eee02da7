// Runs a schedule on a Fabric in simulated time, step by step, with the executor's
// rules (sched/schedule.h): a rank runs its steps in order; a Send never blocks and
// is carried by the sender's port and the receiver's port of its level and by any
// shared port it crosses (fabric.h), each busy with it for alpha + bytes x beta of
// its level, or longer where a shared lane is slower; a Recv waits for its message;
// a RecvReduce then reduces it (bytes x gamma of the message's level) and a local
// Reduce costs bytes x gamma of the Domain level; a Copy costs bytes x
// copy_s_per_byte. Ports are claimed in simulated-time order, so messages meeting on
// a port queue in the order they were sent.
//
// On a machine whose ranks outnumber its cores (fabric.h), each message also takes
// cpu_share x alpha of a core at its sender before it leaves and at its receiver
// once it is there (and alpha x (1 - 2 cpu_share), at least 0, on the link), a network message
// takes its receiver net_rx_s_per_byte per byte of a core more (the kernel's
// receive), and a reduction or copy takes a core for its time: the machine's cores
// are lanes its ranks queue for, as the ports' are.
//
// A network message larger than Fabric::eager_bytes sends that much when it is
// sent and the rest once its receiver has reached the receive (what TCP's socket
// buffers hold goes ahead; the rest waits for the receiver to read).
//
// Each port serves its queue on its own and a message arrives when the last of its
// ports has carried it: concurrent messages share the links as the executor's queued
// sends on separate links (TCP streams, shm channels) do, rather than reserving a
// path end to end, which leaves one port idle while another finishes and predicted
// all-to-all-like schedules (direct, oneshot) 2-3x slower than they run. A rank has
// a port per level, because its shm and network sends move independently. Pipeline
// slices are the builders' own steps, so their overlap is simulated, not assumed.
//
// A network port may be a token bucket (Port::burst_bytes: a shaper such as tc's
// tbf): a message passes at the line rate while the tokens saved up last, then at
// the sustained rate. It shapes what its host sends: what the host receives passes
// at the line rate. The ranks' own ports then move bytes at the line rate. As the
// tokens carry over from call to call, such a fabric is simulated for 8 calls back
// to back (each starting when every rank has finished the one before; calls do not
// overlap), and the result is the mean of the last 4: from full buckets, or from
// empty ones where the calls spend more than the refill.
//
// On a flat fabric (every pair one level, no shared port) without slices this
// gives exactly the closed-form cost above each builder wherever the formula is the
// schedule's critical path (tests/unit/sim). Not modelled: the executor's wait before
// overwriting a range an undelivered Send still reads, shared memory's in-place
// reads (large messages there go when sent), and CPU time where every rank has a
// core (it is part of alpha).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "sched/schedule.h"
#include "sim/fabric.h"

namespace weft::sim {

struct Result {
  double seconds = 0;               // when the last rank finished its last step (a
                                    // bursty fabric: the period of calls back to back)
  std::vector<double> rank_seconds; // per rank
  uint64_t messages = 0;
  std::array<uint64_t, kLevels> bytes{};  // bytes sent per level
};

// The most calls one simulate() runs: a bursty fabric's 8 back to back, twice
// where the first run drains its buckets (what callers budget for).
constexpr int kMaxSimulatedCalls = 16;

// weftInvalidArgument if the schedule's rank count differs from the fabric's;
// weftInternalError naming the ranks on a deadlock or a send/receive count mismatch.
Status simulate(const sched::Schedule& s, const Fabric& f, size_t elem_size, Result* out);

}  // namespace weft::sim
