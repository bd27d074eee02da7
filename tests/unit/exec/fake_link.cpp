#include "fake_link.h"

#include <algorithm>
#include <cstring>

namespace weft::testing {

class FakeLink final : public transport::Link {
 public:
  FakeLink(FakeNet* net, int self, int peer) : Link(peer), net_(net), self_(self) {}

  const char* name() const override { return "fake"; }

  uint64_t send(const void* data, size_t bytes, uint64_t tag) override {
    std::lock_guard<std::recursive_mutex> lock(net_->mu_);
    FakeNet::Wire& w = net_->wire(self_, peer());
    FakeNet::Msg m{tag, bytes, static_cast<const unsigned char*>(data), {}};
    if (!net_->opt_.rendezvous) m.copy.assign(m.src, m.src + bytes);
    w.queue.push_back(std::move(m));
    return w.sent++;  // the ticket is the message's index in this direction
  }

  bool send_done(uint64_t ticket) override {
    if (!net_->opt_.rendezvous) return true;
    std::lock_guard<std::recursive_mutex> lock(net_->mu_);
    return ticket < net_->wire(self_, peer()).consumed;
  }

  void progress() override {}

  Status poll_recv(transport::RecvOp& op, bool* complete) override {
    *complete = false;
    std::lock_guard<std::recursive_mutex> lock(net_->mu_);
    FakeNet::Wire& w = net_->wire(peer(), self_);
    if (held_) {
      // A kept piece: the message (and a rendezvous sender's buffer) stays until it is read.
      if (!op.consumer->released()) return Status::Ok();
      held_ = false;
      if (w.queue.front().delivered == w.queue.front().bytes) {
        w.queue.pop_front();
        ++w.consumed;
        *complete = true;
      }
      return Status::Ok();
    }
    if (w.queue.empty()) return Status::Ok();
    FakeNet::Msg& m = w.queue.front();
    if (m.tag != op.tag || m.bytes != op.bytes)
      return Error(weftInvalidUsage,
                   "fake link: rank %d sent a message with tag %#llx of %zu bytes where rank %d "
                   "expected tag %#llx of %zu bytes",
                   peer(), static_cast<unsigned long long>(m.tag), m.bytes, self_,
                   static_cast<unsigned long long>(op.tag), op.bytes);
    op.started = true;
    if (w.gate && !w.gate()) return Status::Ok();
    const size_t left = m.bytes - m.delivered;
    const size_t n = net_->opt_.piece == 0 ? left : std::min(net_->opt_.piece, left);
    const unsigned char* piece = (net_->opt_.rendezvous ? m.src : m.copy.data()) + m.delivered;
    if (n > 0) {
      if (op.consumer != nullptr) held_ = !op.consumer->consume(piece, m.delivered, n);
      else std::memcpy(static_cast<unsigned char*>(op.dst) + m.delivered, piece, n);
    }
    const size_t offset = m.delivered;
    m.delivered += n;
    op.done = m.delivered;
    w.consumed_bytes += n;
    const uint64_t index = w.consumed;
    if (m.delivered == m.bytes && !held_) {
      w.queue.pop_front();
      ++w.consumed;
      *complete = true;
    }
    if (w.hook) w.hook(index, offset, n);
    return Status::Ok();
  }

  Status peek(transport::NextMessage* next) override {
    std::lock_guard<std::recursive_mutex> lock(net_->mu_);
    FakeNet::Wire& w = net_->wire(peer(), self_);
    if (w.queue.empty()) *next = {};
    else *next = {true, w.queue.front().tag, w.queue.front().bytes};
    return Status::Ok();
  }

  Status check_peer() override {
    std::lock_guard<std::recursive_mutex> lock(net_->mu_);
    if (net_->dead_[static_cast<size_t>(peer())])
      return Error(weftRemoteError, "fake link: peer rank %d exited", peer());
    return Status::Ok();
  }

 private:
  FakeNet* net_;
  int self_;
  bool held_ = false;  // the consumer kept the last piece
};

FakeNet::FakeNet(int nranks, FakeOptions opt)
    : n_(nranks), opt_(opt), wires_(static_cast<size_t>(nranks * nranks)),
      dead_(static_cast<size_t>(nranks), false) {
  links_.resize(static_cast<size_t>(nranks * nranks));
  for (int r = 0; r < nranks; ++r)
    for (int p = 0; p < nranks; ++p)
      if (p != r) links_[static_cast<size_t>(r * nranks + p)] = std::make_unique<FakeLink>(this, r, p);
}

FakeNet::~FakeNet() = default;

std::vector<transport::Link*> FakeNet::links_of(int rank) {
  std::vector<transport::Link*> out(static_cast<size_t>(n_), nullptr);
  for (int p = 0; p < n_; ++p) out[static_cast<size_t>(p)] = links_[static_cast<size_t>(rank * n_ + p)].get();
  return out;
}

void FakeNet::kill(int rank) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  dead_[static_cast<size_t>(rank)] = true;
}

void FakeNet::set_gate(int from, int to, std::function<bool()> gate) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  wire(from, to).gate = std::move(gate);
}

void FakeNet::set_hook(int from, int to, std::function<void(uint64_t, size_t, size_t)> hook) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  wire(from, to).hook = std::move(hook);
}

uint64_t FakeNet::consumed(int from, int to) const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return wire(from, to).consumed;
}

size_t FakeNet::consumed_bytes(int from, int to) const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return wire(from, to).consumed_bytes;
}

uint64_t FakeNet::sent(int from, int to) const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return wire(from, to).sent;
}

}  // namespace weft::testing
