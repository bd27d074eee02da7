// Runs one rank's schedule over the links. Sends are queued and never block;
// a receive polls its link while every link's queued sends keep moving, so any
// schedule that completes with buffered sends completes here. Reductions happen
// as pieces arrive, straight from where the link has them.
//
// Everything is resumable: advance() moves a call as far as the peers' data
// allows and returns, so the progress engine can drive many calls (of different
// communicators) from one thread; run() is advance() in a wait loop.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/wait.h"
#include "exec/data_engine.h"
#include "reduce/reduce.h"
#include "sched/schedule.h"
#include "transports/link.h"

namespace weft::exec {

// Where a call waits, for the stuck-call diagnosis (Health::waiting).
struct WaitInfo {
  uint64_t seq = 0;                       // the collective's sequence number; 0: point-to-point
  const sched::RankPlan* plan = nullptr;  // the collective's plan
  size_t step = 0, nsteps = 0;
  int peer = -1;          // the rank waited on; -1: none (the data engine, a local step)
  const char* what = "";  // the step's kind, or what is awaited of the peer
  size_t bytes_done = 0, bytes = 0;  // of the receive in progress
};

// Communicator-wide checks run between polls while waiting: abort requested,
// a rank lost according to the bootstrap, ...
class Health {
 public:
  virtual Status check() = 0;
  // Called just before check(): where the call is waiting now.
  virtual void waiting(const WaitInfo& where) = 0;

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
  DataEngine* data;       // touches send, recv (and the reductions into them)
};

// A receive's peer: whichever rank's message comes first.
inline constexpr int kAnySource = -1;

// One point-to-point operation of a group.
struct P2P {
  bool send;
  int peer;  // or kAnySource (a receive), replaced by the rank it came from once matched
  void* buf;
  size_t bytes;
  int* from = nullptr;  // kAnySource: told the rank it came from
};

// A copy within this rank, done when its point-to-point call starts: a rank's own
// part of a gather, scatter or all-to-all-v (links join different ranks only).
struct LocalCopy {
  void* dst;
  const void* src;
  size_t bytes;
};

// A send whose buffer a peer may still read.
struct InFlight {
  const unsigned char* data;
  size_t bytes;
  transport::Link* link;
  uint64_t ticket;
};

// Point-to-point operations posted together (a group, or one weftSendAsync):
// its sends go out at once, its local copies are done, its receives complete in
// posting order per peer. Several may be in flight on one executor.
struct P2PCall {
  P2PCall(std::vector<P2P> group, std::vector<LocalCopy> local, int64_t timeout_ms)
      : ops(std::move(group)), copies(std::move(local)), deadline(timeout_ms) {}
  std::vector<P2P> ops;
  std::vector<LocalCopy> copies;
  LazyDeadline deadline;
  // Progress, the executor's.
  bool started = false;
  std::vector<transport::RecvOp> recvs;  // per op (receives only)
  std::vector<uint64_t> recv_turn;       // per op: the peer's receive count it waits for
  std::vector<uint64_t> posted;          // per op, while matching waits: its place among receives (below)
  std::vector<InFlight> sends;
  transport::Link* waiting = nullptr;    // what the last advance() waited on
};

class Executor {
 public:
  // links[r] is the link to rank r (nullptr for this rank and unreachable ones).
  Executor(int rank, std::vector<transport::Link*> links, Health* health);

  // One collective at a time: start() then advance() until *done (or an error).
  void start(Call& call);
  Status advance(Call& call, bool* done);
  // Slow checks while a call waits (peer alive, communicator health, deadline);
  // an error names the peer and what was awaited.
  Status check(Call& call);
  // start + advance in a wait loop (spin, then yield). `call` is the caller's:
  // its lazy deadline starts on the first wait.
  Status run(Call& call);
  // run() with every step a trace span (set_trace() first).
  Status run_traced(Call& call);

  // Point-to-point groups: any number in flight beside each other (never beside
  // a collective). Tags count per peer across calls (they are not collectives,
  // so they do not advance the collective sequence number). Receives match
  // messages in posting order, as MPI's: a receive from any source takes the
  // first message to arrive from a rank that no earlier receive waits for,
  // and until it has one, later receives wait behind it.
  Status advance_p2p(P2PCall& call, bool* done);
  Status check_p2p(P2PCall& call);
  // Posts every send and does the copies, then completes every receive, then
  // waits for the sends: a group's sends and receives to different peers cannot
  // deadlock.
  Status run_p2p(const std::vector<P2P>& ops, const std::vector<LocalCopy>& copies, int64_t timeout_ms);

  // A call failed (the communicator with it): every link gives up the buffers
  // of its queued sends, which the caller may free once the call returns.
  void abandon_sends();

  // WEFT_TRACE: record every schedule step of later calls as a span on (pid, tid).
  void set_trace(int pid, int tid) {
    trace_pid_ = pid;
    trace_tid_ = tid;
    tracing_ = true;
  }

 private:
  unsigned char* resolve(const Call& call, const sched::Range& r) const;
  transport::Link* link_to(int peer) const;
  // Tags count messages per direction of each pair within a call, so both
  // ends agree. A counter belongs to the call whose seq it carries: stale ones
  // restart at 0, so nothing is cleared per call.
  struct Counter {
    uint64_t seq = ~uint64_t{0};
    uint64_t n = 0;
  };
  static uint64_t tag(const Call& call, Counter& c);
  void reset(Call& call);
  // Runs the steps from step_ on as far as they go; kOneStep: at most one (tracing).
  template <bool kOneStep>
  Status advance_steps(Call& call, bool* done);
  // advance() one step at a time, each step a trace span from when it became
  // current to when it completed.
  Status advance_traced(Call& call, bool* done);
  template <bool kTraced>
  Status run_loop(Call& call);
  // The receive of the current step: set up on first visit, then polled.
  Status advance_receive(Call& call, const sched::Step& step, transport::Link* link, bool* complete);
  bool send_in_flight(const unsigned char* p, size_t bytes) const;
  // No send of ours that overlaps [p, p + bytes) is still being read.
  bool sends_done(const unsigned char* p, size_t bytes) const;
  // Retires the sends overlapping [p, p + bytes) that are done; false (and the
  // link waited on noted) while one is still being read.
  bool retire_sends_overlapping(const unsigned char* p, size_t bytes) {
    return in_flight_.empty() || retire_overlapping(p, bytes);
  }
  bool retire_overlapping(const unsigned char* p, size_t bytes);
  void progress_all();
  Status check_waiting(transport::Link* link, LazyDeadline& deadline, const char* what);
  Status step_error(Status st) const;

  int rank_;
  bool tracing_ = false;
  int trace_pid_ = 0, trace_tid_ = 0;
  double step_began_us_ = 0;  // when the current step became current (tracing)
  std::vector<transport::Link*> links_;
  Health* health_;
  std::vector<Counter> sent_;      // messages sent to each peer in this call
  std::vector<Counter> received_;  // messages received from each peer in this call
  std::vector<uint64_t> p2p_sent_, p2p_received_;  // per peer, for the communicator's lifetime
  std::vector<uint64_t> p2p_done_;  // per peer: point-to-point receives completed
  // Receives not yet matched to a peer's message, by posting number (only while
  // a receive from any source is among them): peer, or kAnySource.
  std::map<uint64_t, int> unmatched_;
  uint64_t recv_posts_ = 0;
  int any_next_ = 0;  // the peer a receive from any source looks at first (round-robin)
  // Matches receive i of `call` to the next message of a peer, if its turn has come.
  Status match(P2PCall& call, size_t i);
  void take_turn(P2PCall& call, size_t i, int peer);
  std::vector<unsigned char> scratch_;
  size_t elem_size_ = 0;

  // The collective in progress.
  const sched::RankPlan* plan_ = nullptr;
  // The current receive's consumer: reduces each piece into the destination, or
  // stages it while a send of ours still reads that part of the destination.
  class Receiver final : public transport::Consumer {
   public:
    explicit Receiver(Executor* e) : e_(e) {}
    bool consume(const void* piece, size_t offset, size_t bytes) override;
    bool released() override { return e_->data_->idle(); }

   private:
    Executor* e_;
  };
  void apply(const void* piece, size_t offset, size_t bytes);
  size_t step_ = 0;
  std::vector<InFlight> in_flight_;
  bool receiving_ = false;
  bool finishing_ = false;  // the receive is complete; staged pieces wait for our sends
  transport::RecvOp recv_op_;
  std::vector<unsigned char> staging_;  // receives whose destination is still being sent
  std::vector<std::pair<size_t, size_t>> staged_;
  unsigned char* recv_dst_ = nullptr;
  const unsigned char* recv_src_ = nullptr;
  bool recv_reduce_ = false;
  bool recv_guarded_ = false;
  weftDataType_t dtype_ = weftUint8;
  reduce::Op op_ = reduce::Op::Sum;
  DataEngine* data_ = nullptr;
  Receiver receiver_{this};
  transport::Link* waiting_ = nullptr;  // what the last advance() waited on ...
  const char* waiting_for_ = "receiving";  // ... and for what
};

}  // namespace weft::exec
