#include "transports/ibverbs/connection.h"

#include "transports/ibverbs/ib_link.h"

namespace weft::ib {
namespace {

constexpr int kPollBatch = 16;

const char* write_name(WriteKind k) {
  switch (k) {
    case WriteKind::Credit: return "credit write to ";
    case WriteKind::Close: return "close notice to ";
    default: return "RDMA write to ";
  }
}

}  // namespace

Connection::Connection(std::unique_ptr<QueuePair> qp, std::string peer_name, uint32_t depth)
    : qp_(std::move(qp)), peer_name_(std::move(peer_name)), depth_(depth) {}

// The queue pair goes first: nothing may reach the memory released after it.
Connection::~Connection() {
  qp_.reset();
  entries_.clear();
}

size_t Connection::open_contexts() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const Entry& e : entries_) n += e.state == Entry::State::Open;
  return n;
}

size_t Connection::closed_contexts() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const Entry& e : entries_) n += e.state == Entry::State::Closed;
  return n;
}

Status Connection::open(IbLink* link, uint32_t budget, uint32_t* index) {
  drain();  // a closed context may be released by now
  if (failed_) return fault(link->peer());
  if (budget > depth_ - reserved_)
    return Error(weftSystemError,
                 "ibverbs: the queue pair to %s has room for no more communicators (%u of %u work "
                 "requests reserved, %u wanted)",
                 peer_name_.c_str(), reserved_, depth_, budget);
  size_t i = 0;
  while (i < entries_.size() && entries_[i].state != Entry::State::Free) ++i;
  if (i == kMaxContexts)
    return Error(weftSystemError, "ibverbs: the queue pair to %s carries %u communicators already",
                 peer_name_.c_str(), kMaxContexts);
  // Receives are posted before the context is announced; those of released
  // contexts stay posted and serve the next ones.
  while (posted_ < reserved_ + budget) {
    Status st = qp_->post_recv(0);
    if (!st.ok()) return st.prefix("ibverbs: posting a receive for " + peer_name_ + ": ");
    ++posted_;
  }
  if (i == entries_.size()) entries_.emplace_back();
  entries_[i] = Entry{Entry::State::Open, link, nullptr, budget};
  reserved_ += budget;
  *index = static_cast<uint32_t>(i);
  return Status::Ok();
}

void Connection::close(uint32_t index, std::unique_ptr<ContextMemory> memory, uint32_t in_flight,
                       bool peer_closed, bool announced) {
  Entry& e = entries_[index];
  e.state = Entry::State::Closed;
  e.link = nullptr;
  e.memory = std::move(memory);
  e.in_flight = in_flight;
  e.peer_closed = peer_closed || !announced;
  drain();
}

void Connection::release_done() {
  for (Entry& e : entries_)
    if (e.state == Entry::State::Closed && e.peer_closed && e.in_flight == 0) {
      reserved_ -= e.budget;
      e = Entry{};
    }
}

// Releases the closed contexts that are done, also once the queue pair failed.
void Connection::drain() {
  Completion c[kPollBatch];
  while (!failed_) {
    int got = 0;
    Status st = qp_->poll(c, kPollBatch, &got);
    if (!st.ok()) return fail(st.code(), "ibverbs: completion queue of the link to ", ": " + st.message());
    for (int i = 0; i < got; ++i) on_completion(c[i]);
    if (got < kPollBatch) break;
  }
  release_done();
}

void Connection::on_completion(const Completion& c) {
  if (failed_) return;
  if (c.status != 0)
    return fail(weftRemoteError,
                std::string("ibverbs: ") +
                    (c.kind == Completion::Kind::RecvImm ? "receive from " : write_name(wr_kind(c.wr_id))),
                std::string(" failed: ") + c.status_str + " (status " + std::to_string(c.status) + ")");
  if (c.kind == Completion::Kind::RecvImm) {
    Status st = qp_->post_recv(c.wr_id);
    if (!st.ok()) return fail(st.code(), "ibverbs: posting a receive for ", ": " + st.message());
    const uint32_t i = imm_context(c.imm);
    Entry* e = i < entries_.size() ? &entries_[i] : nullptr;
    if (e != nullptr && e->state == Entry::State::Open) return e->link->on_arrival(imm_kind(c.imm), c.imm & kCountMask);
    if (e != nullptr && e->state == Entry::State::Closed) {
      if (imm_kind(c.imm) == WriteKind::Close) e->peer_closed = true;
      return;  // the peer's last credits, or writes to a communicator closed here
    }
    return fail(weftRemoteError, "ibverbs: ",
                " wrote to communicator context " + std::to_string(i) + ", which is not open here");
  }
  const uint32_t i = wr_context(c.wr_id);
  Entry* e = i < entries_.size() ? &entries_[i] : nullptr;
  if (e != nullptr && e->state == Entry::State::Open) return e->link->on_written(c.wr_id);
  if (e != nullptr && e->state == Entry::State::Closed && e->in_flight > 0) {
    --e->in_flight;
    return;
  }
  fail(weftInternalError, "ibverbs: a write completion of context " + std::to_string(i) + " to ",
       ", which has none in flight");
}

void Connection::fail(weftResult_t code, std::string before, std::string after) {
  if (failed_) return;
  failed_ = true;
  fault_code_ = code;
  fault_before_ = std::move(before);
  fault_after_ = std::move(after);
}

Status Connection::fault(int rank) const {
  return Error(fault_code_, "%speer rank %d (%s)%s", fault_before_.c_str(), rank, peer_name_.c_str(),
               fault_after_.c_str());
}

}  // namespace weft::ib
