#include "exec/executor.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "base/log.h"

namespace weft::exec {
namespace {

// Reduces arriving pieces into dst: dst = src op piece.
class ReduceInto final : public transport::Consumer {
 public:
  ReduceInto(unsigned char* dst, const unsigned char* src, size_t elem, weftDataType_t dtype,
             reduce::Op op)
      : dst_(dst), src_(src), elem_(elem), dtype_(dtype), op_(op) {}
  void consume(const void* piece, size_t offset, size_t bytes) override {
    reduce::reduce2(dst_ + offset, src_ + offset, piece, bytes / elem_, dtype_, op_);
  }

 private:
  unsigned char* dst_;
  const unsigned char* src_;
  size_t elem_;
  weftDataType_t dtype_;
  reduce::Op op_;
};

// A receive (or receive-and-reduce) into a destination that sends of ours may
// still be reading. Each piece goes straight to dst once those sends are done,
// else to staging at the same offset, replayed by finish() after they are done.
// Waiting for the sends before receiving could deadlock when the peer in turn
// waits for us to read its buffer (an exchange); but a peer running the same
// schedule has usually read ours by now (butterfly and direct in place), and
// then nothing is copied twice.
class GuardedReceive final : public transport::Consumer {
 public:
  GuardedReceive(unsigned char* dst, const unsigned char* src, bool reduce, size_t elem, weftDataType_t dtype,
                 reduce::Op op, std::vector<unsigned char>& staging, std::function<bool(size_t, size_t)> clear)
      : dst_(dst), src_(src), reduce_(reduce), elem_(elem), dtype_(dtype), op_(op), staging_(staging),
        clear_(std::move(clear)) {}
  void consume(const void* piece, size_t offset, size_t bytes) override {
    if (clear_(offset, bytes)) {
      apply(piece, offset, bytes);
      return;
    }
    if (staging_.size() < offset + bytes) staging_.resize(offset + bytes);
    std::memcpy(staging_.data() + offset, piece, bytes);
    staged_.push_back({offset, bytes});
  }
  void finish() {
    for (const auto& [offset, bytes] : staged_) apply(staging_.data() + offset, offset, bytes);
  }

 private:
  void apply(const void* piece, size_t offset, size_t bytes) {
    if (reduce_) reduce::reduce2(dst_ + offset, src_ + offset, piece, bytes / elem_, dtype_, op_);
    else std::memcpy(dst_ + offset, piece, bytes);
  }
  unsigned char* dst_;
  const unsigned char* src_;
  bool reduce_;
  size_t elem_;
  weftDataType_t dtype_;
  reduce::Op op_;
  std::vector<unsigned char>& staging_;
  std::function<bool(size_t, size_t)> clear_;
  std::vector<std::pair<size_t, size_t>> staged_;
};

bool overlaps(const unsigned char* a, size_t an, const unsigned char* b, size_t bn) {
  return a < b + bn && b < a + an;
}

}  // namespace

unsigned char* Executor::resolve(const Call& call, const sched::Range& r) const {
  unsigned char* base;
  switch (r.buf) {
    case sched::Buf::Send: base = static_cast<unsigned char*>(const_cast<void*>(call.send)); break;
    case sched::Buf::Recv: base = static_cast<unsigned char*>(call.recv); break;
    default: base = const_cast<unsigned char*>(scratch_.data()); break;
  }
  return base + r.offset * elem_size_;
}

transport::Link* Executor::link_to(int peer, size_t) const {
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

Status Executor::check_waiting(Call& call, transport::Link* link, const char* what) {
  Status st = link->check_peer();
  if (st.ok() && health_ != nullptr) st = health_->check();
  if (st.ok() && call.deadline.expired())
    st = Error(weftTimeout, "timed out after WEFT_TIMEOUT_MS=%lld ms waiting for rank %d (%s)",
               static_cast<long long>(call.deadline.ms()), link->peer(), what);
  return st;
}

Status Executor::recv(Call& call, transport::Link* link, transport::RecvOp& op) {
  SpinWait wait;
  for (;;) {
    bool complete = false;
    WEFT_TRY(link->poll_recv(op, &complete));
    if (complete) return Status::Ok();
    progress_all();
    wait.pause();
    if (wait.should_check()) {
      Status st = check_waiting(call, link, "receiving");
      if (st.ok()) continue;
      // A peer may write its last message and exit between our poll and the
      // check: look once more before calling the data lost.
      WEFT_TRY(link->poll_recv(op, &complete));
      if (complete) return Status::Ok();
      return st;
    }
  }
}

Status Executor::wait_send(Call& call, const InFlight& s) {
  SpinWait wait;
  while (!s.link->send_done(s.ticket)) {
    progress_all();
    wait.pause();
    if (wait.should_check()) {
      Status st = check_waiting(call, s.link, "its read of our buffer");
      if (!st.ok() && !s.link->send_done(s.ticket)) return st;
    }
  }
  return Status::Ok();
}

// A range about to be written may still be read by a peer (a rendezvous send
// in flight): wait for those sends first.
Status Executor::wait_sends_overlapping(Call& call, const unsigned char* p, size_t bytes) {
  for (size_t i = 0; i < in_flight_.size();) {
    const InFlight& s = in_flight_[i];
    if (overlaps(p, bytes, s.data, s.bytes)) {
      WEFT_TRY(wait_send(call, s));
      in_flight_.erase(in_flight_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  return Status::Ok();
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

Status Executor::receive(Call& call, const sched::Step& step, transport::Link* link) {
  unsigned char* dst = resolve(call, step.dst);
  const unsigned char* src = resolve(call, step.src);
  size_t bytes = step.dst.count * elem_size_;
  transport::RecvOp op;
  op.tag = tag(call, received_[static_cast<size_t>(step.peer)]);
  op.bytes = bytes;
  if (send_in_flight(dst, bytes)) {
    if (!sends_done(dst, bytes))
      return receive_guarded(call, link, op, dst, src, step.kind != sched::Kind::Recv);
    // Already read: the sends just retire and the receive lands directly (a link
    // fills a plain destination with fewer copies than it feeds a consumer).
    WEFT_TRY(wait_sends_overlapping(call, dst, bytes));
  }
  ReduceInto reducer(dst, src, elem_size_, call.dtype, call.op);
  if (step.kind == sched::Kind::Recv) op.dst = dst;
  else op.consumer = &reducer;
  return recv(call, link, op);
}

// Out of line: its std::function and staging would weigh on every receive.
Status Executor::receive_guarded(Call& call, transport::Link* link, transport::RecvOp& op,
                                 unsigned char* dst, const unsigned char* src, bool reduce) {
  GuardedReceive guarded(dst, src, reduce, elem_size_, call.dtype, call.op, staging_,
                         [&](size_t offset, size_t n) { return sends_done(dst + offset, n); });
  op.consumer = &guarded;
  WEFT_TRY(recv(call, link, op));
  WEFT_TRY(wait_sends_overlapping(call, dst, op.bytes));
  guarded.finish();
  return Status::Ok();
}

Status Executor::run(Call& call) {
  elem_size_ = reduce::dtype_size(call.dtype);
  const sched::RankPlan& plan = *call.plan;
  if (scratch_.size() < plan.scratch_count * elem_size_) scratch_.resize(plan.scratch_count * elem_size_);
  in_flight_.clear();

  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const sched::Step& step = plan.steps[i];
    Status st;
    if (step.kind == sched::Kind::Reduce) {
      unsigned char* dst = resolve(call, step.dst);
      st = wait_sends_overlapping(call, dst, step.dst.count * elem_size_);
      if (st.ok())
        reduce::reduce2(dst, dst, resolve(call, step.src), step.dst.count, call.dtype, call.op);
    } else if (step.kind == sched::Kind::Copy) {
      unsigned char* dst = resolve(call, step.dst);
      const unsigned char* src = resolve(call, step.src);
      size_t bytes = step.dst.count * elem_size_;
      if (dst != src) {
        st = wait_sends_overlapping(call, dst, bytes);
        if (st.ok()) std::memmove(dst, src, bytes);
      }
    } else {
      transport::Link* link = link_to(step.peer, i);
      if (link == nullptr)
        return Error(weftInternalError, "step %zu (%s) names rank %d, which has no link", i,
                     sched::kind_name(step.kind), step.peer);
      if (step.kind == sched::Kind::Send) {
        const unsigned char* src = resolve(call, step.src);
        size_t bytes = step.src.count * elem_size_;
        uint64_t ticket = link->send(src, bytes, tag(call, sent_[static_cast<size_t>(step.peer)]));
        if (!link->send_done(ticket)) in_flight_.push_back({src, bytes, link, ticket});
      } else {
        st = receive(call, step, link);
      }
    }
    if (!st.ok())
      return st.prefix("step " + std::to_string(i) + " (" + sched::kind_name(step.kind) +
                       (step.peer >= 0 ? " rank " + std::to_string(step.peer) : std::string()) +
                       "): ");
  }
  for (const InFlight& s : in_flight_) WEFT_TRY(wait_send(call, s));
  in_flight_.clear();
  return Status::Ok();
}

}  // namespace weft::exec

namespace weft::exec {

Status Executor::run_p2p(const std::vector<P2P>& ops, int64_t timeout_ms) {
  // A point-to-point tag has the top bit set so it never equals a collective's.
  constexpr uint64_t kP2P = 1ull << 63;
  Call call{nullptr, nullptr, nullptr, weftUint8, reduce::Op::Sum, 0, LazyDeadline(timeout_ms)};
  in_flight_.clear();
  for (const P2P& op : ops) {
    if (!op.send) continue;
    transport::Link* link = link_to(op.peer, 0);
    if (link == nullptr) return Error(weftInvalidArgument, "send to rank %d: no link to that rank", op.peer);
    uint64_t t = kP2P | (p2p_sent_[static_cast<size_t>(op.peer)]++ & 0xffffffffffffull);
    auto* data = static_cast<const unsigned char*>(op.buf);
    uint64_t ticket = link->send(data, op.bytes, t);
    if (!link->send_done(ticket)) in_flight_.push_back({data, op.bytes, link, ticket});
  }
  for (const P2P& op : ops) {
    if (op.send) continue;
    transport::Link* link = link_to(op.peer, 0);
    if (link == nullptr) return Error(weftInvalidArgument, "recv from rank %d: no link to that rank", op.peer);
    transport::RecvOp r;
    r.tag = kP2P | (p2p_received_[static_cast<size_t>(op.peer)]++ & 0xffffffffffffull);
    r.bytes = op.bytes;
    r.dst = op.buf;
    Status st = recv(call, link, r);
    if (!st.ok()) return st.prefix("recv from rank " + std::to_string(op.peer) + ": ");
  }
  for (const InFlight& s : in_flight_) {
    Status st = wait_send(call, s);
    if (!st.ok()) return st.prefix("send to rank " + std::to_string(s.link->peer()) + ": ");
  }
  in_flight_.clear();
  return Status::Ok();
}

}  // namespace weft::exec
