#include "transports/ibverbs/ib_link.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace weft::ib {
namespace {

constexpr uint32_t kSlotMagic = 0x534c4257u;  // "WBLS"
constexpr uint32_t kMaxSlots = 4096;

}  // namespace

ContextMemory::~ContextMemory() {
  cache.reset();
  if (staging_region.handle != nullptr) reg.dereg(staging_region);
  if (ring_region.handle != nullptr) reg.dereg(ring_region);
  std::free(ring);
}

Status IbLink::create(std::shared_ptr<Connection> conn, int peer, LinkOptions opts,
                      std::unique_ptr<IbLink>* out) {
  if (opts.slots == 0 || opts.slots > kMaxSlots)
    return Error(weftInvalidArgument, "WEFT_IB_SLOTS=%u: must be 1..%u", opts.slots, kMaxSlots);
  if (opts.slot_bytes < 2 * sizeof(SlotHeader) || opts.slot_bytes % 64 != 0)
    return Error(weftInvalidArgument,
                 "WEFT_IB_SLOT_BYTES=%u: must be a multiple of 64 of at least 128", opts.slot_bytes);
  std::unique_ptr<IbLink> l(new IbLink(peer, std::move(conn), opts));
  ContextMemory& m = *l->mem_;
  m.reg = l->conn_->queue_pair().registrar();
  m.cache = std::make_unique<RegCache>(m.reg, opts.reg_cache_bytes);
  size_t ring_bytes = size_t{opts.slots} * opts.slot_bytes;
  m.ring = std::aligned_alloc(4096, (ring_bytes + 4095) / 4096 * 4096);
  if (m.ring == nullptr)
    return Error(weftSystemError, "ibverbs: cannot allocate a %zu-byte receive ring", ring_bytes);
  WEFT_TRY(m.reg.reg(reinterpret_cast<uintptr_t>(m.ring), ring_bytes, &m.ring_region));
  m.ring_region.base = reinterpret_cast<uintptr_t>(m.ring);
  m.ring_region.bytes = ring_bytes;
  Status st;
  {
    std::lock_guard<std::mutex> lock(l->conn_->mu());
    st = l->conn_->open(l.get(), context_budget(opts), &l->index_);
  }
  WEFT_TRY(st);  // unlocked first: `l` may hold the last reference to the connection
  *out = std::move(l);
  return Status::Ok();
}

IbLink::IbLink(int peer, std::shared_ptr<Connection> conn, LinkOptions opts)
    : Link(peer), conn_(std::move(conn)), opts_(opts), mem_(std::make_unique<ContextMemory>()),
      index_(kMaxContexts), recv_credits_(opts.slots, opts.credit_batch) {}

// The context closes; its memory goes to the connection, which keeps it until
// neither side can write to or gather from it any more.
IbLink::~IbLink() {
  if (index_ == kMaxContexts) return;  // never opened
  std::lock_guard<std::mutex> lock(conn_->mu());
  uint32_t in_flight = credit_writes_;
  for (OutMsg& m : out_) {
    in_flight += m.in_flight;
    if (m.registered) mem_->cache->release(m.region);
  }
  if (announced_ && remote_.slots != 0 && !conn_->failed()) {
    Status st = conn_->queue_pair().post_write(nullptr, 0, remote_.addr, remote_.rkey,
                                               make_imm(WriteKind::Close, remote_.context, 0),
                                               make_wr(index_, WriteKind::Close));
    if (st.ok())
      ++in_flight;
    else
      conn_->fail(st.code(), "ibverbs: sending the close notice to ", ": " + st.message());
  }
  conn_->close(index_, std::move(mem_), in_flight, peer_closed_, announced_);
}

RemoteRing IbLink::local_ring() {
  std::lock_guard<std::mutex> lock(conn_->mu());
  announced_ = true;
  return {reinterpret_cast<uint64_t>(mem_->ring), mem_->ring_region.rkey, opts_.slots, opts_.slot_bytes, index_};
}

Status IbLink::set_remote(const RemoteRing& r) {
  std::lock_guard<std::mutex> lock(conn_->mu());
  if (r.slots == 0 || r.slots > kMaxSlots || r.slot_bytes < 2 * sizeof(SlotHeader) ||
      r.slot_bytes % 64 != 0 || r.context >= kMaxContexts)
    return Error(weftRemoteError,
                 "ibverbs: peer rank %d (%s) offers a ring of %u slots of %u bytes as context %u",
                 peer(), conn_->peer_name().c_str(), r.slots, r.slot_bytes, r.context);
  // The receives each side reserved count the other's slots as its own.
  if (r.slots != opts_.slots)
    return Error(weftInvalidUsage,
                 "ibverbs: peer rank %d (%s) has %u ring slots, this rank %u: WEFT_IB_SLOTS must "
                 "be the same on every rank",
                 peer(), conn_->peer_name().c_str(), r.slots, opts_.slots);
  remote_ = r;
  send_credits_ = SenderCredits(r.slots);
  ContextMemory& m = *mem_;
  m.staging.assign(r.slots, SlotHeader{});
  staging_busy_.assign(r.slots, false);
  WEFT_TRY(m.reg.reg(reinterpret_cast<uintptr_t>(m.staging.data()), m.staging.size() * sizeof(SlotHeader),
                     &m.staging_region));
  m.staging_region.base = reinterpret_cast<uintptr_t>(m.staging.data());
  m.staging_region.bytes = m.staging.size() * sizeof(SlotHeader);
  return Status::Ok();
}

Status IbLink::fail(Status st) {
  if (error_.ok()) error_ = std::move(st);
  return error_;
}

// ---- completions ----------------------------------------------------------

// Drains the queue pair; the first failure, this context's or the queue pair's.
Status IbLink::check() {
  if (!error_.ok()) return error_;
  conn_->drain();
  if (conn_->failed()) return fail(conn_->fault(peer()));
  return error_;
}

void IbLink::on_arrival(WriteKind kind, uint32_t count) {
  if (!error_.ok()) return;
  switch (kind) {
    case WriteKind::Credit: {
      // The total's low bits; it lies within `slots` below what we used.
      uint64_t used = send_credits_.used();
      uint64_t total = (used & ~uint64_t{kCountMask}) | count;
      if (total > used) total -= uint64_t{1} << kCountBits;
      if (!send_credits_.on_returned(total))
        (void)fail(Error(weftRemoteError,
                         "ibverbs: peer rank %d (%s) returned credits for %llu slots, but only "
                         "%llu were written",
                         peer(), conn_->peer_name().c_str(), static_cast<unsigned long long>(total),
                         static_cast<unsigned long long>(used)));
      return;
    }
    case WriteKind::Data:
      if (count != (arrived_ & kCountMask)) {
        (void)fail(Error(weftRemoteError,
                         "ibverbs: from peer rank %d (%s): slot %u arrived while expecting slot %llu",
                         peer(), conn_->peer_name().c_str(), count,
                         static_cast<unsigned long long>(arrived_ & kCountMask)));
        return;
      }
      ++arrived_;
      return;
    default:
      peer_closed_ = true;
      return;
  }
}

void IbLink::on_written(uint64_t wr_id) {
  if (wr_kind(wr_id) == WriteKind::Credit) {
    --credit_writes_;
    return;
  }
  uint64_t ticket = wr_ticket(wr_id);
  staging_busy_[wr_staging(wr_id)] = false;
  OutMsg* m = find(ticket);
  if (m == nullptr || m->in_flight == 0) {
    (void)fail(Error(weftInternalError, "ibverbs: completion for unknown send %llu to rank %d",
                     static_cast<unsigned long long>(ticket), peer()));
    return;
  }
  --m->in_flight;
  retire_done();
}

IbLink::OutMsg* IbLink::find(uint64_t ticket) {
  for (OutMsg& m : out_)
    if (m.ticket == ticket) return &m;
  return nullptr;
}

// Sends complete in order (one queue pair), so done ones leave from the front.
void IbLink::retire_done() {
  while (!out_.empty() && out_.front().all_posted && out_.front().in_flight == 0) {
    if (out_.front().registered) mem_->cache->release(out_.front().region);
    out_.pop_front();
  }
}

// ---- sending --------------------------------------------------------------

uint64_t IbLink::send(const void* data, size_t bytes, uint64_t tag) {
  std::lock_guard<std::mutex> lock(conn_->mu());
  uint64_t ticket = next_ticket_++;
  out_.push_back({ticket, static_cast<const unsigned char*>(data), bytes, tag, send_seq_++});
  progress_locked();
  return ticket;
}

// Posts pieces while slots are free; false after an error.
bool IbLink::post_pieces() {
  const size_t payload = remote_.slot_bytes - sizeof(SlotHeader);
  for (OutMsg& m : out_) {
    if (m.all_posted) continue;
    if (!m.registered && m.bytes > 0) {
      Status st = mem_->cache->acquire(m.data, m.bytes, &m.region);
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
      SlotHeader& h = mem_->staging[idx];
      h = SlotHeader{kSlotMagic, static_cast<uint32_t>(n), written_, m.seq, m.tag, m.bytes, m.posted, {}};
      Sge sg[2];
      sg[0] = {reinterpret_cast<uint64_t>(&h), sizeof(SlotHeader), mem_->staging_region.lkey};
      int nsg = 1;
      if (n > 0) sg[nsg++] = {reinterpret_cast<uint64_t>(m.data + m.posted), static_cast<uint32_t>(n), m.region.lkey};
      uint64_t raddr = remote_.addr + uint64_t{idx} * remote_.slot_bytes;
      Status st = conn_->queue_pair().post_write(sg, nsg, raddr, remote_.rkey,
                                                 make_imm(WriteKind::Data, remote_.context, written_),
                                                 make_wr(index_, WriteKind::Data, m.ticket, idx));
      if (!st.ok()) {
        conn_->fail(st.code(), "ibverbs: posting a write to ", ": " + st.message());
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

void IbLink::progress_locked() {
  if (remote_.slots == 0 || !check().ok()) return;
  if (post_pieces()) return_credits();
}

void IbLink::progress() {
  std::lock_guard<std::mutex> lock(conn_->mu());
  progress_locked();
}

bool IbLink::send_done(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(conn_->mu());
  progress_locked();
  if (out_.empty() || ticket < out_.front().ticket) return true;
  const OutMsg* m = find(ticket);
  return m == nullptr;
}

// The call failed: the caller may free its buffers, so no more pieces are
// read from them (those in flight read registered, still pinned memory).
void IbLink::abandon_sends() {
  std::lock_guard<std::mutex> lock(conn_->mu());
  for (OutMsg& m : out_) m.all_posted = true;
  retire_done();
}

// ---- receiving ------------------------------------------------------------

void IbLink::return_credits() {
  uint64_t total = recv_credits_.to_return();
  if (total == 0 || credit_writes_ >= opts_.slots) return;
  Status st = conn_->queue_pair().post_write(nullptr, 0, remote_.addr, remote_.rkey,
                                             make_imm(WriteKind::Credit, remote_.context, total),
                                             make_wr(index_, WriteKind::Credit));
  if (!st.ok()) {
    conn_->fail(st.code(), "ibverbs: returning credits to ", ": " + st.message());
    return;
  }
  ++credit_writes_;
  recv_credits_.returned(total);
}

Status IbLink::poll_recv(transport::RecvOp& op, bool* complete) {
  std::lock_guard<std::mutex> lock(conn_->mu());
  *complete = false;
  WEFT_TRY(check());
  if (held_) {
    if (!op.consumer->released()) return Status::Ok();
    held_ = false;
    if (slot_consumed(op, complete)) return error_;
  }
  const size_t payload = opts_.slot_bytes - sizeof(SlotHeader);
  while (consumed_ < arrived_) {
    auto* slot = static_cast<unsigned char*>(mem_->ring) + (consumed_ % opts_.slots) * opts_.slot_bytes;
    SlotHeader h;
    std::memcpy(&h, slot, sizeof h);
    if (h.magic != kSlotMagic || h.slot_seq != consumed_ || h.piece_bytes > payload ||
        h.offset > h.msg_bytes || h.piece_bytes > h.msg_bytes - h.offset)
      return fail(Error(weftRemoteError,
                        "ibverbs: malformed slot %llu from peer rank %d (%s): magic %#x, slot "
                        "%llu, %u bytes at offset %llu of %llu",
                        static_cast<unsigned long long>(consumed_), peer(), conn_->peer_name().c_str(),
                        h.magic, static_cast<unsigned long long>(h.slot_seq), h.piece_bytes,
                        static_cast<unsigned long long>(h.offset),
                        static_cast<unsigned long long>(h.msg_bytes)));
    if (h.msg_seq != recv_seq_ || h.offset != op.done)
      return fail(Error(weftRemoteError,
                        "ibverbs: from peer rank %d (%s): piece at offset %llu of message %llu "
                        "while expecting offset %zu of message %llu",
                        peer(), conn_->peer_name().c_str(), static_cast<unsigned long long>(h.offset),
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
  // The peer's close notice follows its last write: nothing more will come.
  if (peer_closed_)
    return fail(Error(weftRemoteError,
                      "ibverbs: peer rank %d (%s) closed this communicator while a %zu-byte receive "
                      "from it was pending (%zu bytes received)",
                      peer(), conn_->peer_name().c_str(), op.bytes, op.done));
  return error_;
}

// Between messages the ring's next slot is the first piece of the next one
// (poll_recv judges it when it is received).
Status IbLink::peek(transport::NextMessage* next) {
  std::lock_guard<std::mutex> lock(conn_->mu());
  next->arrived = false;
  WEFT_TRY(check());
  if (consumed_ == arrived_) return error_;
  SlotHeader h;
  std::memcpy(&h, static_cast<unsigned char*>(mem_->ring) + (consumed_ % opts_.slots) * opts_.slot_bytes, sizeof h);
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
  std::lock_guard<std::mutex> lock(conn_->mu());
  return check();
}

}  // namespace weft::ib
