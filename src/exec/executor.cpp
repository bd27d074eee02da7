#include "exec/executor.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/params.h"
#include "base/trace.h"

namespace weft::exec {
namespace {

// A point-to-point tag has the top bit set so it never equals a collective's.
constexpr uint64_t kP2P = 1ull << 63;
constexpr uint64_t kP2PCountMask = 0xffffffffffffull;
constexpr uint64_t kReceived = ~uint64_t{0};  // P2PCall::recv_turn of a completed receive
constexpr uint64_t kUnmatched = kReceived - 1;  // ... of one not yet matched to a peer's message

bool overlaps(const unsigned char* a, size_t an, const unsigned char* b, size_t bn) {
  return a < b + bn && b < a + an;
}

}  // namespace

Executor::Executor(int rank, std::vector<transport::Link*> links, Health* health)
    : rank_(rank), links_(std::move(links)), health_(health), sent_(links_.size()), received_(links_.size()),
      p2p_sent_(links_.size(), 0), p2p_received_(links_.size(), 0), p2p_done_(links_.size(), 0) {}

unsigned char* Executor::resolve(const Call& call, const sched::Range& r) const {
  unsigned char* base;
  switch (r.buf) {
    case sched::Buf::Send: base = static_cast<unsigned char*>(const_cast<void*>(call.send)); break;
    case sched::Buf::Recv: base = static_cast<unsigned char*>(call.recv); break;
    default: base = const_cast<unsigned char*>(scratch_.data()); break;
  }
  return base + r.offset * elem_size_;
}

transport::Link* Executor::link_to(int peer) const {
  if (peer < 0 || static_cast<size_t>(peer) >= links_.size()) return nullptr;
  return links_[static_cast<size_t>(peer)];
}

uint64_t Executor::tag(const Call& call, Counter& c) {
  if (c.seq != call.seq) c = {call.seq, 0};
  return (call.seq << 24) | (c.n++ & 0xffffff);
}

void Executor::progress_all() {
  for (transport::Link* l : links_)
    if (l != nullptr) l->progress();
}

void Executor::abandon_sends() {
  for (transport::Link* l : links_)
    if (l != nullptr) l->abandon_sends();
  in_flight_.clear();
}

Status Executor::check_waiting(transport::Link* link, LazyDeadline& deadline, const char* what) {
  Status st = link != nullptr ? link->check_peer() : Status::Ok();
  if (st.ok() && health_ != nullptr) st = health_->check();
  if (st.ok() && deadline.expired()) {
    if (link != nullptr)
      st = Error(weftTimeout, "timed out after WEFT_TIMEOUT_MS=%lld ms waiting for rank %d (%s)",
                 static_cast<long long>(deadline.ms()), link->peer(), what);
    else
      st = Error(weftTimeout, "timed out after WEFT_TIMEOUT_MS=%lld ms (%s)", static_cast<long long>(deadline.ms()),
                 what);
  }
  return st;
}

bool Executor::send_in_flight(const unsigned char* p, size_t bytes) const {
  for (const InFlight& s : in_flight_)
    if (overlaps(p, bytes, s.data, s.bytes)) return true;
  return false;
}

bool Executor::sends_done(const unsigned char* p, size_t bytes) const {
  for (const InFlight& s : in_flight_)
    if (overlaps(p, bytes, s.data, s.bytes) && !s.link->send_done(s.ticket)) return false;
  return true;
}

// A range about to be written may still be read by a peer (a rendezvous send
// in flight): it may be written only once those sends are done.
bool Executor::retire_overlapping(const unsigned char* p, size_t bytes) {
  for (size_t i = 0; i < in_flight_.size();) {
    const InFlight& s = in_flight_[i];
    if (!overlaps(p, bytes, s.data, s.bytes)) {
      ++i;
    } else if (s.link->send_done(s.ticket)) {
      in_flight_.erase(in_flight_.begin() + static_cast<long>(i));
    } else {
      waiting_ = s.link;
      waiting_for_ = "its read of our buffer";
      return false;
    }
  }
  return true;
}

// A receive into a destination that sends of ours may still be reading: each
// piece goes straight to dst once those sends are done, else to staging at the
// same offset, applied after they are done. Waiting for the sends before
// receiving could deadlock when the peer in turn waits for us to read its
// buffer (an exchange); but a peer running the same schedule has usually read
// ours by now (butterfly and direct in place), and then nothing is copied twice.
bool Executor::Receiver::consume(const void* piece, size_t offset, size_t bytes) {
  Executor& e = *e_;
  if (e.recv_guarded_ && !e.sends_done(e.recv_dst_ + offset, bytes)) {
    if (e.staging_.size() < offset + bytes) e.staging_.resize(offset + bytes);
    std::memcpy(e.staging_.data() + offset, piece, bytes);
    e.staged_.push_back({offset, bytes});
    return true;
  }
  e.apply(piece, offset, bytes);
  return e.data_->idle();  // an asynchronous engine reads the piece later
}

void Executor::apply(const void* piece, size_t offset, size_t bytes) {
  if (recv_reduce_) data_->reduce2(recv_dst_ + offset, recv_src_ + offset, piece, bytes / elem_size_, dtype_, op_);
  else data_->copy(recv_dst_ + offset, piece, bytes);
}

Status Executor::advance_receive(Call& call, const sched::Step& step, transport::Link* link, bool* complete) {
  *complete = false;
  if (!receiving_) {
    recv_dst_ = resolve(call, step.dst);
    recv_src_ = resolve(call, step.src);
    recv_reduce_ = step.kind != sched::Kind::Recv;
    recv_op_ = transport::RecvOp{};
    recv_op_.tag = tag(call, received_[static_cast<size_t>(step.peer)]);
    recv_op_.bytes = step.dst.count * elem_size_;
    recv_guarded_ = false;
    staged_.clear();
    if (send_in_flight(recv_dst_, recv_op_.bytes)) {
      // Already read: the sends just retire and the receive lands directly (a link
      // fills a plain destination with fewer copies than it feeds a consumer).
      if (sends_done(recv_dst_, recv_op_.bytes)) retire_sends_overlapping(recv_dst_, recv_op_.bytes);
      else recv_guarded_ = true;
    }
    if (recv_reduce_ || recv_guarded_ || !data_->host_memory) recv_op_.consumer = &receiver_;
    else recv_op_.dst = recv_dst_;
    receiving_ = true;
    finishing_ = false;
  }
  if (!finishing_) {
    bool arrived = false;
    WEFT_TRY(link->poll_recv(recv_op_, &arrived));
    if (!arrived) {
      waiting_ = link;
      waiting_for_ = "receiving";
      return Status::Ok();
    }
    finishing_ = true;
  }
  if (recv_guarded_) {
    if (!retire_sends_overlapping(recv_dst_, recv_op_.bytes)) return Status::Ok();
    for (const auto& [offset, bytes] : staged_) apply(staging_.data() + offset, offset, bytes);
    staged_.clear();
  }
  receiving_ = false;
  *complete = true;
  return Status::Ok();
}

void Executor::start(Call& call) { reset(call); }

inline void Executor::reset(Call& call) {
  elem_size_ = reduce::dtype_size(call.dtype);
  dtype_ = call.dtype;
  op_ = call.op;
  data_ = call.data;
  plan_ = call.plan;
  if (scratch_.size() < call.plan->scratch_count * elem_size_) scratch_.resize(call.plan->scratch_count * elem_size_);
  in_flight_.clear();
  step_ = 0;
  step_began_us_ = -1;  // set at the first advance (tracing)
  receiving_ = false;  // (a failed call may have left one open)
}

Status Executor::step_error(Status st) const {
  if (st.ok() || plan_ == nullptr || step_ >= plan_->steps.size()) return st;
  const sched::Step& step = plan_->steps[step_];
  return st.prefix("step " + std::to_string(step_) + " (" + sched::kind_name(step.kind) +
                   (step.peer >= 0 ? " rank " + std::to_string(step.peer) : std::string()) + "): ");
}

template <bool kOneStep>
Status Executor::advance_steps(Call& call, bool* done) {
  const std::vector<sched::Step>& steps = call.plan->steps;
  // The step index lives in a register while the loop runs (the kernels it
  // calls could otherwise change step_ for all the compiler knows).
  size_t i = step_;
  struct Keep {
    size_t& to;
    const size_t& from;
    ~Keep() { to = from; }
  } keep{step_, i};
  const size_t end = kOneStep ? std::min(i + 1, steps.size()) : steps.size();
  for (; i < end; ++i) {
    const sched::Step& step = steps[i];
    if (step.kind == sched::Kind::Reduce) {
      unsigned char* dst = resolve(call, step.dst);
      if (!retire_sends_overlapping(dst, step.dst.count * elem_size_)) return Status::Ok();
      data_->reduce2(dst, dst, resolve(call, step.src), step.dst.count, call.dtype, call.op);
    } else if (step.kind == sched::Kind::Copy) {
      unsigned char* dst = resolve(call, step.dst);
      const unsigned char* src = resolve(call, step.src);
      size_t bytes = step.dst.count * elem_size_;
      if (dst != src) {
        if (!retire_sends_overlapping(dst, bytes)) return Status::Ok();
        data_->copy(dst, src, bytes);
      }
    } else {
      transport::Link* link = link_to(step.peer);
      if (link == nullptr)
        return Error(weftInternalError, "the plan names rank %d, which has no link", step.peer);
      if (step.kind == sched::Kind::Send) {
        if (!data_->idle()) {  // what it sends may still be being written
          waiting_ = nullptr;
          waiting_for_ = "the data engine";
          return Status::Ok();
        }
        const unsigned char* src = resolve(call, step.src);
        size_t bytes = step.src.count * elem_size_;
        uint64_t ticket = link->send(src, bytes, tag(call, sent_[static_cast<size_t>(step.peer)]));
        if (!link->send_done(ticket)) in_flight_.push_back({src, bytes, link, ticket});
      } else {
        bool complete = false;
        WEFT_TRY(advance_receive(call, step, link, &complete));
        if (!complete) return Status::Ok();
      }
    }
  }
  if (kOneStep && i < steps.size()) return Status::Ok();
  if (!in_flight_.empty()) {
    for (const InFlight& s : in_flight_)
      if (!s.link->send_done(s.ticket)) {
        waiting_ = s.link;
        waiting_for_ = "its read of our buffer";
        return Status::Ok();
      }
    in_flight_.clear();
  }
  if (!data_->idle()) {
    waiting_ = nullptr;
    waiting_for_ = "the data engine";
    return Status::Ok();
  }
  *done = true;
  return Status::Ok();
}

Status Executor::advance_traced(Call& call, bool* done) {
  const std::vector<sched::Step>& steps = call.plan->steps;
  if (step_ == 0 && step_began_us_ < 0) step_began_us_ = trace::now_us();
  while (step_ < steps.size()) {
    const size_t i = step_;
    WEFT_TRY(advance_steps<true>(call, done));
    if (step_ == i) return Status::Ok();
    const sched::Step& s = steps[i];
    const double end = trace::now_us();
    const uint64_t count = s.kind == sched::Kind::Send ? s.src.count : s.dst.count;
    char args[96];
    std::snprintf(args, sizeof(args), "\"step\": %zu, \"peer\": %d, \"bytes\": %llu", i, s.peer,
                  static_cast<unsigned long long>(count * elem_size_));
    trace::span("step", s.peer >= 0 ? std::string(sched::kind_name(s.kind)) + " " + std::to_string(s.peer)
                                    : std::string(sched::kind_name(s.kind)),
                step_began_us_, end, trace_pid_, trace_tid_, args);
    step_began_us_ = end;
  }
  return advance_steps<false>(call, done);
}

Status Executor::advance(Call& call, bool* done) {
  *done = false;
  const size_t before = step_;
  Status st = tracing_ ? advance_traced(call, done) : advance_steps<false>(call, done);
  if (step_ != before) note_progress();
  if (!st.ok()) return step_error(std::move(st));
  // Waiting: move every link's queued sends along before the next look.
  if (!*done) progress_all();
  return st;
}

Status Executor::check(Call& call) {
  if (health_ != nullptr && plan_ != nullptr) {
    WaitInfo w;
    w.seq = call.seq;
    w.plan = call.plan;
    w.step = step_;
    w.nsteps = plan_->steps.size();
    w.peer = waiting_ != nullptr ? waiting_->peer() : -1;
    w.what = waiting_for_;
    if (receiving_) {
      if (step_ < plan_->steps.size()) w.what = sched::kind_name(plan_->steps[step_].kind);
      w.bytes_done = recv_op_.done;
      w.bytes = recv_op_.bytes;
    }
    health_->waiting(w);
  }
  return step_error(check_waiting(waiting_, call.deadline, waiting_for_));
}

template <bool kTraced>
[[gnu::always_inline]] inline Status Executor::run_loop(Call& call) {
  reset(call);
  bool done = false;
  // A call that needs no peer (one rank, or everything already there) ends here.
  Status first = kTraced ? advance_traced(call, &done) : advance_steps<false>(call, &done);
  if (done) return first;
  if (!first.ok()) return step_error(std::move(first));
  progress_all();
  SpinWait wait;
  for (;;) {
    wait.pause();
    WEFT_TRY(advance(call, &done));
    if (done) return Status::Ok();
    if (!wait.should_check()) continue;
    Status st = check(call);
    if (st.ok()) continue;
    // A peer may write its last message and exit between our poll and the
    // check: look once more before calling the data lost.
    WEFT_TRY(advance(call, &done));
    return done ? Status::Ok() : st;
  }
}

Status Executor::run(Call& call) { return run_loop<false>(call); }

Status Executor::run_traced(Call& call) { return run_loop<true>(call); }

void Executor::take_turn(P2PCall& call, size_t i, int peer) {
  P2P& op = call.ops[i];
  op.peer = peer;
  if (op.from != nullptr) *op.from = peer;
  call.recv_turn[i] = p2p_received_[static_cast<size_t>(peer)]++;
  call.recvs[i].tag = kP2P | (call.recv_turn[i] & kP2PCountMask);
  call.recvs[i].bytes = op.bytes;
  call.recvs[i].dst = op.buf;
}

Status Executor::match(P2PCall& call, size_t i) {
  const uint64_t me = call.posted[i];
  const int want = call.ops[i].peer;
  // Earlier receives match first: one from any source before every later one,
  // one from a peer before later ones that could take that peer's message.
  int earlier[8];
  size_t nearlier = 0;
  for (auto it = unmatched_.begin(); it != unmatched_.end() && it->first < me; ++it) {
    if (it->second == kAnySource || it->second == want) return Status::Ok();
    if (nearlier == 8) return Status::Ok();  // crowded: wait for them to match
    earlier[nearlier++] = it->second;
  }
  if (want != kAnySource) {
    unmatched_.erase(me);
    take_turn(call, i, want);
    return Status::Ok();
  }
  const int n = static_cast<int>(links_.size());
  for (int k = 0; k < n; ++k) {
    const int q = (any_next_ + k) % n;
    const auto uq = static_cast<size_t>(q);
    transport::Link* link = links_[uq];
    // A receive from q under way, or waiting its turn, gets q's next message.
    if (link == nullptr || p2p_done_[uq] != p2p_received_[uq] ||
        std::find(earlier, earlier + nearlier, q) != earlier + nearlier)
      continue;
    transport::NextMessage next;
    Status st = link->peek(&next);
    if (!st.ok()) return st.prefix("recv from any rank: rank " + std::to_string(q) + ": ");
    if (!next.arrived || next.tag != (kP2P | (p2p_received_[uq] & kP2PCountMask))) continue;
    any_next_ = (q + 1) % n;
    unmatched_.erase(me);
    take_turn(call, i, q);  // a size that differs is refused by the receive, naming q
    note_progress();
    return Status::Ok();
  }
  return Status::Ok();
}

Status Executor::advance_p2p(P2PCall& call, bool* done) {
  *done = false;
  if (!call.started) {
    for (const P2P& op : call.ops)
      if ((op.send || op.peer != kAnySource) && link_to(op.peer) == nullptr)
        return Error(weftInvalidArgument, "%s rank %d: no link to that rank", op.send ? "send to" : "recv from",
                     op.peer);
    call.recvs.resize(call.ops.size());
    call.recv_turn.assign(call.ops.size(), kReceived);
    for (size_t i = 0; i < call.ops.size(); ++i) {
      const P2P& op = call.ops[i];
      if (op.send) {
        auto peer = static_cast<size_t>(op.peer);
        transport::Link* link = link_to(op.peer);
        auto* data = static_cast<const unsigned char*>(op.buf);
        uint64_t ticket = link->send(data, op.bytes, kP2P | (p2p_sent_[peer]++ & kP2PCountMask));
        if (!link->send_done(ticket)) call.sends.push_back({data, op.bytes, link, ticket});
      } else if (op.peer != kAnySource && unmatched_.empty()) {
        take_turn(call, i, op.peer);
      } else {
        // A failed call leaves its entry: the communicator fails with it.
        call.posted.resize(call.ops.size());
        call.posted[i] = recv_posts_++;
        call.recv_turn[i] = kUnmatched;
        unmatched_.emplace(call.posted[i], op.peer);
      }
    }
    // Point-to-point buffers are host memory (validate_p2p, check_memory), as the
    // receives above that land straight in them assume.
    for (const LocalCopy& c : call.copies) std::memcpy(c.dst, c.src, c.bytes);
    call.started = true;
    note_progress();
  }
  progress_all();
  bool received = true;
  for (size_t i = 0; i < call.ops.size(); ++i) {
    if (call.recv_turn[i] == kReceived) continue;
    if (call.recv_turn[i] == kUnmatched) {
      WEFT_TRY(match(call, i));
      if (call.recv_turn[i] == kUnmatched) {
        received = false;
        call.waiting = nullptr;
        continue;
      }
    }
    auto peer = static_cast<size_t>(call.ops[i].peer);
    // Messages from one peer arrive in order: an earlier receive from it goes first.
    if (p2p_done_[peer] != call.recv_turn[i]) {
      received = false;
      continue;
    }
    transport::Link* link = link_to(call.ops[i].peer);
    bool complete = false;
    Status st = link->poll_recv(call.recvs[i], &complete);
    if (!st.ok()) return st.prefix("recv from rank " + std::to_string(peer) + ": ");
    if (complete) {
      ++p2p_done_[peer];
      call.recv_turn[i] = kReceived;
      note_progress();
    } else {
      received = false;
      call.waiting = link;
    }
  }
  if (!received) return Status::Ok();
  while (!call.sends.empty()) {
    if (!call.sends.back().link->send_done(call.sends.back().ticket)) {
      call.waiting = call.sends.back().link;
      return Status::Ok();
    }
    call.sends.pop_back();
  }
  *done = true;
  return Status::Ok();
}

Status Executor::check_p2p(P2PCall& call) {
  bool sending = call.waiting != nullptr && std::any_of(call.sends.begin(), call.sends.end(), [&](const InFlight& s) {
                   return s.link == call.waiting;
                 });
  const char* what = sending ? "its read of our send" : "receiving";
  if (health_ != nullptr) {
    WaitInfo w;
    w.peer = call.waiting != nullptr ? call.waiting->peer() : -1;
    w.what = what;
    health_->waiting(w);
  }
  Status st = check_waiting(call.waiting, call.deadline, what);
  if (st.ok()) return st;
  if (call.waiting == nullptr) {
    for (size_t i = 0; i < call.ops.size(); ++i) {
      if (call.recv_turn.empty() || call.recv_turn[i] != kUnmatched) continue;
      if (call.ops[i].peer == kAnySource) return st.prefix("recv from any rank: ");
      return st.prefix("recv from rank " + std::to_string(call.ops[i].peer) +
                       " (behind a receive from any rank): ");
    }
    return st;
  }
  return st.prefix(std::string(sending ? "send to" : "recv from") + " rank " + std::to_string(call.waiting->peer()) +
                   ": ");
}

Status Executor::run_p2p(const std::vector<P2P>& ops, const std::vector<LocalCopy>& copies, int64_t timeout_ms) {
  P2PCall call(ops, copies, timeout_ms);
  SpinWait wait;
  for (;;) {
    bool done = false;
    WEFT_TRY(advance_p2p(call, &done));
    if (done) return Status::Ok();
    wait.pause();
    if (!wait.should_check()) continue;
    Status st = check_p2p(call);
    if (st.ok()) continue;
    WEFT_TRY(advance_p2p(call, &done));
    return done ? Status::Ok() : st;
  }
}

}  // namespace weft::exec
