#include "transports/ibverbs/ib_link.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace weft::ib {
namespace {

constexpr uint32_t kSlotMagic = 0x534c4257u;  // "WBLS"
constexpr uint32_t kMaxSlots = 4096;
constexpr uint64_t kCreditWr = ~uint64_t{0};
constexpr int kStagingBits = 12;  // data wr_id: ticket << 12 | staging index
constexpr int kPollBatch = 16;

uint64_t data_wr(uint64_t ticket, uint32_t idx) { return (ticket << kStagingBits) | idx; }

}  // namespace

Status IbLink::create(int peer, std::string peer_name, std::unique_ptr<QueuePair> qp,
                      LinkOptions opts, std::unique_ptr<IbLink>* out) {
  if (opts.slots == 0 || opts.slots > kMaxSlots)
    return Error(weftInvalidArgument, "WEFT_IB_SLOTS=%u: must be 1..%u", opts.slots, kMaxSlots);
  if (opts.slot_bytes < 2 * sizeof(SlotHeader) || opts.slot_bytes % 64 != 0)
    return Error(weftInvalidArgument,
                 "WEFT_IB_SLOT_BYTES=%u: must be a multiple of 64 of at least 128", opts.slot_bytes);
  std::unique_ptr<IbLink> l(new IbLink(peer, std::move(peer_name), std::move(qp), opts));
  size_t ring_bytes = size_t{opts.slots} * opts.slot_bytes;
  l->ring_ = std::aligned_alloc(4096, (ring_bytes + 4095) / 4096 * 4096);
  if (l->ring_ == nullptr)
    return Error(weftSystemError, "ibverbs: cannot allocate a %zu-byte receive ring", ring_bytes);
  Registrar reg = l->qp_->registrar();
  WEFT_TRY(reg.reg(reinterpret_cast<uintptr_t>(l->ring_), ring_bytes, &l->ring_region_));
  l->ring_region_.base = reinterpret_cast<uintptr_t>(l->ring_);
  l->ring_region_.bytes = ring_bytes;
  // Every write to us (data or credits) consumes one receive. Credits in
  // flight are at most `slots` (each returns at least one slot the peer has
  // not used again), so twice the ring never runs dry.
  for (uint32_t i = 0; i < 2 * opts.slots; ++i) WEFT_TRY(l->qp_->post_recv(i));
  *out = std::move(l);
  return Status::Ok();
}

IbLink::IbLink(int peer, std::string peer_name, std::unique_ptr<QueuePair> qp, LinkOptions opts)
    : Link(peer), peer_name_(std::move(peer_name)), qp_(std::move(qp)), opts_(opts),
      cache_(std::make_unique<RegCache>(qp_->registrar(), opts.reg_cache_bytes)),
      recv_credits_(opts.slots, opts.credit_batch) {}

IbLink::~IbLink() {
  Registrar reg = qp_->registrar();
  qp_.reset();  // first: nothing may reach the memory deregistered below
  for (OutMsg& m : out_)
    if (m.registered) cache_->release(m.region);
  cache_.reset();
  if (staging_region_.handle != nullptr) reg.dereg(staging_region_);
  if (ring_region_.handle != nullptr) reg.dereg(ring_region_);
  std::free(ring_);
}

RemoteRing IbLink::local_ring() const {
  return {reinterpret_cast<uint64_t>(ring_), ring_region_.rkey, opts_.slots, opts_.slot_bytes};
}

Status IbLink::set_remote(const RemoteRing& r) {
  if (r.slots == 0 || r.slots > kMaxSlots || r.slot_bytes < 2 * sizeof(SlotHeader) ||
      r.slot_bytes % 64 != 0)
    return Error(weftRemoteError, "ibverbs: peer rank %d (%s) offers a ring of %u slots of %u bytes",
                 peer(), peer_name_.c_str(), r.slots, r.slot_bytes);
  remote_ = r;
  send_credits_ = SenderCredits(r.slots);
  staging_.assign(r.slots, SlotHeader{});
  staging_busy_.assign(r.slots, false);
  Registrar reg = qp_->registrar();
  WEFT_TRY(reg.reg(reinterpret_cast<uintptr_t>(staging_.data()), staging_.size() * sizeof(SlotHeader),
                   &staging_region_));
  staging_region_.base = reinterpret_cast<uintptr_t>(staging_.data());
  staging_region_.bytes = staging_.size() * sizeof(SlotHeader);
  return Status::Ok();
}

Status IbLink::fail(Status st) {
  if (error_.ok()) error_ = std::move(st);
  return error_;
}

// ---- completions ----------------------------------------------------------

Status IbLink::drain() {
  Completion c[kPollBatch];
  for (;;) {
    int got = 0;
    Status st = qp_->poll(c, kPollBatch, &got);
    if (!st.ok())
      return fail(st.prefix("ibverbs: completion queue of the link to peer rank " +
                            std::to_string(peer()) + " (" + peer_name_ + "): "));
    for (int i = 0; i < got; ++i) WEFT_TRY(on_completion(c[i]));
    if (got < kPollBatch) return error_;
  }
}

Status IbLink::on_completion(const Completion& c) {
  if (c.status != 0) {
    const char* what = c.kind == Completion::Kind::RecvImm ? "receive from"
                       : c.wr_id == kCreditWr             ? "credit write to"
                                                          : "RDMA write to";
    return fail(Error(weftRemoteError, "ibverbs: %s peer rank %d (%s) failed: %s (status %d)", what,
                      peer(), peer_name_.c_str(), c.status_str, c.status));
  }
  if (c.kind == Completion::Kind::RecvImm) {
    if (c.imm & kCreditImm) {
      // The total's low 31 bits; it lies within `slots` below what we used.
      uint64_t used = send_credits_.used();
      uint64_t total = (used & ~uint64_t{0x7fffffff}) | (c.imm & 0x7fffffffu);
      if (total > used) total -= uint64_t{1} << 31;
      if (!send_credits_.on_returned(total))
        return fail(Error(weftRemoteError,
                          "ibverbs: peer rank %d (%s) returned credits for %llu slots, but only "
                          "%llu were written",
                          peer(), peer_name_.c_str(), static_cast<unsigned long long>(total),
                          static_cast<unsigned long long>(used)));
    } else {
      if (c.imm != (arrived_ & 0x7fffffffu))
        return fail(Error(weftRemoteError,
                          "ibverbs: from peer rank %d (%s): slot %u arrived while expecting slot %llu",
                          peer(), peer_name_.c_str(), c.imm,
                          static_cast<unsigned long long>(arrived_ & 0x7fffffffu)));
      ++arrived_;
    }
    return qp_->post_recv(c.wr_id);
  }
  if (c.wr_id == kCreditWr) {
    --credit_writes_;
    return Status::Ok();
  }
  uint64_t ticket = c.wr_id >> kStagingBits;
  staging_busy_[c.wr_id & ((1u << kStagingBits) - 1)] = false;
  OutMsg* m = find(ticket);
  if (m == nullptr || m->in_flight == 0)
    return fail(Error(weftInternalError, "ibverbs: completion for unknown send %llu to rank %d",
                      static_cast<unsigned long long>(ticket), peer()));
  --m->in_flight;
  retire_done();
  return Status::Ok();
}

IbLink::OutMsg* IbLink::find(uint64_t ticket) {
  for (OutMsg& m : out_)
    if (m.ticket == ticket) return &m;
  return nullptr;
}

// Sends complete in order (one queue pair), so done ones leave from the front.
void IbLink::retire_done() {
  while (!out_.empty() && out_.front().all_posted && out_.front().in_flight == 0) {
    if (out_.front().registered) cache_->release(out_.front().region);
    out_.pop_front();
  }
}

// ---- sending --------------------------------------------------------------

uint64_t IbLink::send(const void* data, size_t bytes, uint64_t tag) {
  uint64_t ticket = next_ticket_++;
  out_.push_back({ticket, static_cast<const unsigned char*>(data), bytes, tag, send_seq_++});
  progress();
  return ticket;
}

// Posts pieces while slots are free; false after an error.
bool IbLink::post_pieces() {
  const size_t payload = remote_.slot_bytes - sizeof(SlotHeader);
  for (OutMsg& m : out_) {
    if (m.all_posted) continue;
    if (!m.registered && m.bytes > 0) {
      Status st = cache_->acquire(m.data, m.bytes, &m.region);
      if (!st.ok()) {
        (void)fail(st.prefix("ibverbs: registering a " + std::to_string(m.bytes) +
                             "-byte send buffer for peer rank " + std::to_string(peer()) + ": "));
        return false;
      }
      m.registered = true;
    }
    while (!m.all_posted) {
      uint32_t idx = static_cast<uint32_t>(written_ % remote_.slots);
      if (staging_busy_[idx] || !send_credits_.take()) return true;
      size_t n = std::min(payload, m.bytes - m.posted);
      SlotHeader& h = staging_[idx];
      h = SlotHeader{kSlotMagic, static_cast<uint32_t>(n), written_, m.seq, m.tag, m.bytes, m.posted, {}};
      Sge sg[2];
      sg[0] = {reinterpret_cast<uint64_t>(&h), sizeof(SlotHeader), staging_region_.lkey};
      int nsg = 1;
      if (n > 0) sg[nsg++] = {reinterpret_cast<uint64_t>(m.data + m.posted), static_cast<uint32_t>(n), m.region.lkey};
      uint64_t raddr = remote_.addr + uint64_t{idx} * remote_.slot_bytes;
      Status st = qp_->post_write(sg, nsg, raddr, remote_.rkey,
                                  static_cast<uint32_t>(written_ & 0x7fffffffu), data_wr(m.ticket, idx));
      if (!st.ok()) {
        (void)fail(st.prefix("ibverbs: posting a write to peer rank " + std::to_string(peer()) +
                             " (" + peer_name_ + "): "));
        return false;
      }
      staging_busy_[idx] = true;
      ++written_;
      ++m.in_flight;
      m.posted += n;
      m.all_posted = m.posted == m.bytes;
    }
  }
  return true;
}

void IbLink::progress() {
  if (!error_.ok() || remote_.slots == 0) return;
  if (!drain().ok()) return;
  if (post_pieces()) return_credits();
}

bool IbLink::send_done(uint64_t ticket) {
  progress();
  if (out_.empty() || ticket < out_.front().ticket) return true;
  const OutMsg* m = find(ticket);
  return m == nullptr;
}

// ---- receiving ------------------------------------------------------------

void IbLink::return_credits() {
  uint64_t total = recv_credits_.to_return();
  if (total == 0 || credit_writes_ >= opts_.slots) return;
  Status st = qp_->post_write(nullptr, 0, remote_.addr, remote_.rkey,
                              kCreditImm | static_cast<uint32_t>(total & 0x7fffffffu), kCreditWr);
  if (!st.ok()) {
    (void)fail(st.prefix("ibverbs: returning credits to peer rank " + std::to_string(peer()) + ": "));
    return;
  }
  ++credit_writes_;
  recv_credits_.returned(total);
}

Status IbLink::poll_recv(transport::RecvOp& op, bool* complete) {
  *complete = false;
  WEFT_TRY(error_);
  WEFT_TRY(drain());
  if (held_) {
    if (!op.consumer->released()) return Status::Ok();
    held_ = false;
    if (slot_consumed(op, complete)) return error_;
  }
  const size_t payload = opts_.slot_bytes - sizeof(SlotHeader);
  while (consumed_ < arrived_) {
    auto* slot = static_cast<unsigned char*>(ring_) + (consumed_ % opts_.slots) * opts_.slot_bytes;
    SlotHeader h;
    std::memcpy(&h, slot, sizeof h);
    if (h.magic != kSlotMagic || h.slot_seq != consumed_ || h.piece_bytes > payload ||
        h.offset > h.msg_bytes || h.piece_bytes > h.msg_bytes - h.offset)
      return fail(Error(weftRemoteError,
                        "ibverbs: malformed slot %llu from peer rank %d (%s): magic %#x, slot "
                        "%llu, %u bytes at offset %llu of %llu",
                        static_cast<unsigned long long>(consumed_), peer(), peer_name_.c_str(),
                        h.magic, static_cast<unsigned long long>(h.slot_seq), h.piece_bytes,
                        static_cast<unsigned long long>(h.offset),
                        static_cast<unsigned long long>(h.msg_bytes)));
    if (h.msg_seq != recv_seq_ || h.offset != op.done)
      return fail(Error(weftRemoteError,
                        "ibverbs: from peer rank %d (%s): piece at offset %llu of message %llu "
                        "while expecting offset %zu of message %llu",
                        peer(), peer_name_.c_str(), static_cast<unsigned long long>(h.offset),
                        static_cast<unsigned long long>(h.msg_seq), op.done,
                        static_cast<unsigned long long>(recv_seq_)));
    if (h.tag != op.tag || h.msg_bytes != op.bytes)
      return fail(Error(weftInvalidUsage,
                        "mismatched calls: expected a %zu-byte message (tag %#llx) from rank %d, "
                        "received %llu bytes (tag %#llx); do all ranks call the same collectives "
                        "with the same count and datatype?",
                        op.bytes, static_cast<unsigned long long>(op.tag), peer(),
                        static_cast<unsigned long long>(h.msg_bytes),
                        static_cast<unsigned long long>(h.tag)));
    op.started = true;
    const unsigned char* data = slot + sizeof(SlotHeader);
    if (op.consumer != nullptr) {
      if (h.piece_bytes > 0) held_ = !op.consumer->consume(data, h.offset, h.piece_bytes);
    } else if (h.piece_bytes > 0) {
      std::memcpy(static_cast<unsigned char*>(op.dst) + h.offset, data, h.piece_bytes);
    }
    op.done += h.piece_bytes;
    // A slot the consumer kept goes back to the peer once it is done with it.
    if (held_) return error_;
    if (slot_consumed(op, complete)) return error_;
  }
  return error_;
}

// Between messages the ring's next slot is the first piece of the next one
// (poll_recv judges it when it is received).
Status IbLink::peek(transport::NextMessage* next) {
  next->arrived = false;
  WEFT_TRY(error_);
  WEFT_TRY(drain());
  if (consumed_ == arrived_) return error_;
  SlotHeader h;
  std::memcpy(&h, static_cast<unsigned char*>(ring_) + (consumed_ % opts_.slots) * opts_.slot_bytes, sizeof h);
  *next = {true, h.tag, static_cast<size_t>(h.msg_bytes)};
  return error_;
}

bool IbLink::slot_consumed(const transport::RecvOp& op, bool* complete) {
  ++consumed_;
  recv_credits_.consumed();
  return_credits();
  if (op.done != op.bytes) return false;
  ++recv_seq_;
  *complete = true;
  return true;
}

Status IbLink::check_peer() {
  if (error_.ok()) (void)drain();
  return error_;
}

}  // namespace weft::ib
