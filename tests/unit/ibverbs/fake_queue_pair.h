// An in-memory pair of connected queue pairs with the semantics the ibverbs
// link relies on: registered memory checked by key and bounds on both sides,
// RDMA writes with immediate that consume one posted receive of the peer
// (none posted: "RNR retry counter exceeded", as a real RC pair with finite
// RNR retries would report), completions in posting order, and after the
// first failed write every later one flushed, as a queue pair in the error
// state does; a write to a destroyed queue pair fails as an unanswered one.
// With auto_deliver off, writes wait until deliver() runs them, so tests can
// look between posting and completion. Thread-safe (one lock for the fabric),
// so that two threads can play the two ranks.
#pragma once

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include "transports/ibverbs/queue_pair.h"

namespace weft::ib::testing {

class FakeFabric;

class FakeQueuePair final : public QueuePair {
 public:
  FakeQueuePair(FakeFabric* f, int side) : fabric_(f), side_(side) {}
  ~FakeQueuePair() override;
  Status post_write(const Sge* sges, int n, uint64_t raddr, uint32_t rkey, uint32_t imm,
                    uint64_t wr_id) override;
  Status post_recv(uint64_t wr_id) override;
  Status poll(Completion* out, int max, int* got) override;
  Registrar registrar() override;

  size_t posted_recvs() const;

 private:
  friend class FakeFabric;
  FakeFabric* fabric_;
  int side_;
  std::deque<uint64_t> recvs_;
  std::deque<Completion> cq_;
};

class FakeFabric {
 public:
  bool auto_deliver = true;
  int registrations = 0;

  std::unique_ptr<QueuePair> make(int side) { return std::make_unique<FakeQueuePair>(this, side); }
  void bind(FakeQueuePair* a, FakeQueuePair* b) { qp_[0] = a, qp_[1] = b; }

  // The next write posted from `side` fails with this status.
  void fail_next_write(int side, int status, const char* str) { inject_[side] = {status, str}; }

  // Runs queued writes (all when n < 0); returns how many ran.
  int deliver(int n = -1) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    int ran = 0;
    while (!queue_.empty() && (n < 0 || ran < n)) {
      Write w = std::move(queue_.front());
      queue_.pop_front();
      run(w);
      ++ran;
    }
    return ran;
  }
  size_t queued() const {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return queue_.size();
  }
  // Memory regions registered now, on both sides.
  size_t live_registrations() const {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return mrs_.size();
  }

 private:
  friend class FakeQueuePair;
  struct Mr {
    uintptr_t base;
    size_t bytes;
    int side;
  };
  struct Write {
    int from;
    Sge sges[2];  // gathered when the write runs, as a NIC reads at transmit time
    int nsge;
    uint64_t raddr;
    uint32_t rkey;
    uint32_t imm;
    uint64_t wr_id;
  };
  struct Inject {
    int status = 0;
    const char* str = "";
  };

  const Mr* key(uint32_t k) const {
    auto it = mrs_.find(k);
    return it == mrs_.end() ? nullptr : &it->second;
  }
  static bool covers(const Mr* m, uint64_t addr, size_t n) {
    return m != nullptr && addr >= m->base && addr + n <= m->base + m->bytes;
  }

  void complete(int side, Completion c) {
    if (qp_[side] != nullptr) qp_[side]->cq_.push_back(c);
  }

  void run(const Write& w) {
    FakeQueuePair* peer = qp_[1 - w.from];
    Completion done{Completion::Kind::Write, w.wr_id, 0, 0, "success"};
    auto error = [&](int status, const char* str) {
      done.status = status;
      done.status_str = str;
      broken_[w.from] = true;
      complete(w.from, done);
    };
    if (qp_[w.from] == nullptr) return;  // its queue pair is gone, and its writes with it
    if (broken_[w.from]) return error(5, "Work Request Flushed Error");
    // A destroyed peer never acknowledges: the sender retries until it gives up.
    if (peer == nullptr) return error(12, "transport retry counter exceeded");
    if (inject_[w.from].status != 0) {
      Inject i = inject_[w.from];
      inject_[w.from] = {};
      return error(i.status, i.str);
    }
    size_t total = 0;
    for (int i = 0; i < w.nsge; ++i) {
      const Mr* m = key(w.sges[i].lkey);
      if (m == nullptr || m->side != w.from || !covers(m, w.sges[i].addr, w.sges[i].bytes))
        return error(8, "local protection error");
      total += w.sges[i].bytes;
    }
    const Mr* r = key(w.rkey);
    if (total > 0 && (r == nullptr || r->side == w.from || !covers(r, w.raddr, total)))
      return error(10, "remote access error");
    if (peer->recvs_.empty()) return error(13, "RNR retry counter exceeded");
    auto* dst = reinterpret_cast<unsigned char*>(w.raddr);
    for (int i = 0; i < w.nsge; ++i) {
      std::memcpy(dst, reinterpret_cast<const void*>(w.sges[i].addr), w.sges[i].bytes);
      dst += w.sges[i].bytes;
    }
    uint64_t recv_id = peer->recvs_.front();
    peer->recvs_.pop_front();
    complete(1 - w.from, {Completion::Kind::RecvImm, recv_id, w.imm, 0, "success"});
    complete(w.from, done);
  }

  mutable std::recursive_mutex mu_;
  FakeQueuePair* qp_[2] = {nullptr, nullptr};
  std::map<uint32_t, Mr> mrs_;
  uint32_t next_key_ = 1;
  std::deque<Write> queue_;
  Inject inject_[2];
  bool broken_[2] = {false, false};
};

inline Status FakeQueuePair::post_write(const Sge* sges, int n, uint64_t raddr, uint32_t rkey,
                                        uint32_t imm, uint64_t wr_id) {
  if (n < 0 || n > 2) return Error(weftInternalError, "fake: %d gather entries", n);
  std::lock_guard<std::recursive_mutex> lock(fabric_->mu_);
  FakeFabric::Write w{side_, {}, n, raddr, rkey, imm, wr_id};
  for (int i = 0; i < n; ++i) w.sges[i] = sges[i];
  fabric_->queue_.push_back(w);
  if (fabric_->auto_deliver) fabric_->deliver();
  return Status::Ok();
}

inline FakeQueuePair::~FakeQueuePair() {
  std::lock_guard<std::recursive_mutex> lock(fabric_->mu_);
  if (fabric_->qp_[side_] == this) fabric_->qp_[side_] = nullptr;
}

inline Status FakeQueuePair::post_recv(uint64_t wr_id) {
  std::lock_guard<std::recursive_mutex> lock(fabric_->mu_);
  recvs_.push_back(wr_id);
  return Status::Ok();
}

inline Status FakeQueuePair::poll(Completion* out, int max, int* got) {
  std::lock_guard<std::recursive_mutex> lock(fabric_->mu_);
  *got = 0;
  while (*got < max && !cq_.empty()) {
    out[(*got)++] = cq_.front();
    cq_.pop_front();
  }
  return Status::Ok();
}

inline size_t FakeQueuePair::posted_recvs() const {
  std::lock_guard<std::recursive_mutex> lock(fabric_->mu_);
  return recvs_.size();
}

inline Registrar FakeQueuePair::registrar() {
  FakeFabric* f = fabric_;
  int side = side_;
  return Registrar{[f, side](uintptr_t base, size_t bytes, Region* out) {
                     std::lock_guard<std::recursive_mutex> lock(f->mu_);
                     uint32_t k = f->next_key_++;
                     f->mrs_[k] = {base, bytes, side};
                     ++f->registrations;
                     out->lkey = out->rkey = k;
                     out->handle = reinterpret_cast<void*>(uintptr_t{k});
                     return Status::Ok();
                   },
                   [f](const Region& r) {
                     std::lock_guard<std::recursive_mutex> lock(f->mu_);
                     f->mrs_.erase(r.lkey);
                   }};
}

}  // namespace weft::ib::testing
