// Runs one rank's schedule over the links. Sends are queued and never block;
// a receive waits (spin, then yield) while every link's queued sends keep
// moving, so any schedule that completes with buffered sends completes here.
// Reductions happen as pieces arrive, straight from where the link has them.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "base/wait.h"
#include "reduce/reduce.h"
#include "sched/schedule.h"
#include "transports/link.h"

namespace weft::exec {

// Communicator-wide checks run between polls while waiting: abort requested,
// a rank lost according to the bootstrap, ...
class Health {
 public:
  virtual Status check() = 0;

 protected:
  ~Health() = default;
};

struct Call {
  const sched::RankPlan* plan;
  const void* send;
  void* recv;
  weftDataType_t dtype;
  reduce::Op op;
  uint64_t seq;  // collective sequence number, part of every message tag
  LazyDeadline deadline;  // WEFT_TIMEOUT_MS (or the config's), from the first long wait
};

// One point-to-point operation of a group.
struct P2P {
  bool send;
  int peer;
  void* buf;
  size_t bytes;
};

class Executor {
 public:
  // links[r] is the link to rank r (nullptr for this rank and unreachable ones).
  Executor(int rank, std::vector<transport::Link*> links, Health* health)
      : rank_(rank), links_(std::move(links)), health_(health), sent_(links_.size()),
        received_(links_.size()),
        p2p_sent_(links_.size(), 0),
        p2p_received_(links_.size(), 0) {}

  // `call` is the caller's: its lazy deadline starts on the first wait.
  Status run(Call& call);
  // Posts every send, then completes every receive in order, then waits for the
  // sends: a group's sends and receives to different peers cannot deadlock.
  // Point-to-point tags count per peer across calls (they are not collectives,
  // so they do not advance the collective sequence number).
  Status run_p2p(const std::vector<P2P>& ops, int64_t timeout_ms);

 private:
  struct InFlight {
    const unsigned char* data;
    size_t bytes;
    transport::Link* link;
    uint64_t ticket;
  };

  unsigned char* resolve(const Call& call, const sched::Range& r) const;
  transport::Link* link_to(int peer, size_t step) const;
  // Tags count messages per direction of each pair within a call, so both
  // ends agree. A counter belongs to the call whose seq it carries: stale ones
  // restart at 0, so nothing is cleared per call.
  struct Counter {
    uint64_t seq = ~uint64_t{0};
    uint64_t n = 0;
  };
  static uint64_t tag(const Call& call, Counter& c);
  Status recv(Call& call, transport::Link* link, transport::RecvOp& op);
  Status receive(Call& call, const sched::Step& step, transport::Link* link);
  [[gnu::noinline]] Status receive_guarded(Call& call, transport::Link* link, transport::RecvOp& op,
                                           unsigned char* dst, const unsigned char* src, bool reduce);
  bool send_in_flight(const unsigned char* p, size_t bytes) const;
  // No send of ours that overlaps [p, p + bytes) is still being read.
  bool sends_done(const unsigned char* p, size_t bytes) const;
  Status wait_sends_overlapping(Call& call, const unsigned char* p, size_t bytes);
  Status wait_send(Call& call, const InFlight& s);
  void progress_all();
  Status check_waiting(Call& call, transport::Link* link, const char* what);

  int rank_;
  std::vector<transport::Link*> links_;
  Health* health_;
  std::vector<Counter> sent_;      // messages sent to each peer in this call
  std::vector<Counter> received_;  // messages received from each peer in this call
  std::vector<uint64_t> p2p_sent_, p2p_received_;  // per peer, for the communicator's lifetime
  std::vector<InFlight> in_flight_;
  std::vector<unsigned char> scratch_;
  std::vector<unsigned char> staging_;  // receives whose destination is still being sent
  size_t elem_size_ = 0;
};

}  // namespace weft::exec
