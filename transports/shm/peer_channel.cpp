#include "transports/shm/peer_channel.h"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/params.h"
#include "base/wait.h"

namespace weft::shm {
namespace {

uint32_t pack_context(size_t index, uint8_t gen) { return static_cast<uint32_t>(index) | uint32_t{gen} << 16; }
size_t context_index(uint32_t ctx) { return ctx & 0xffffu; }
uint8_t context_gen(uint32_t ctx) { return static_cast<uint8_t>(ctx >> 16); }

const void* slot_data(const SlotHeader* h, const unsigned char* payload) {
  return h->bytes <= kInlineBytes ? static_cast<const void*>(h->inline_data) : payload;
}

// What post_slot writes and nothing else: a peer that is broken, of another
// build or not weft at all must not make us read past its slot.
bool slot_sane(uint32_t kind, uint32_t bytes, size_t slot_bytes) {
  if (kind & ~uint32_t{kKindMask | kTimedStores | kStreamedStores}) return false;
  kind &= kKindMask;
  return kind == kRndv ? bytes == sizeof(RndvDescriptor) : kind == kEager && bytes <= slot_bytes;
}

// The head line's read costs: ticks per byte in 1/65536ths (0: none yet).
uint32_t to_fixed(double ticks_per_byte) {
  return static_cast<uint32_t>(std::clamp(ticks_per_byte * 65536.0, 1.0, 4e9));
}
double from_fixed(uint32_t v) { return v / 65536.0; }

}  // namespace

PeerChannel::PeerChannel(pid_t peer_pid, ChannelView out, ChannelView in, LinkOptions opts)
    : peer_pid_(peer_pid), out_(out), in_(in), opts_(opts), slot_copy_(opts.stream, opts.stream_pct), mappings_(peer_pid) {
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, peer_pid, 0));
}

PeerChannel::~PeerChannel() {
  if (pidfd_ >= 0) close(pidfd_);
}

// ---- contexts ------------------------------------------------------------

uint32_t PeerChannel::open_in() {
  std::lock_guard<SpinLock> lock(recv_mu_);
  size_t i = 0;
  while (i < ins_.size() && ins_[i]->open) ++i;
  if (i == kMaxContexts) return kNoContext;
  if (i == ins_.size()) ins_.push_back(std::make_unique<InContext>());
  InContext& c = *ins_[i];
  c.open = true;
  c.consumed = c.rndv_received = 0;
  in_.contexts[i].consumed.store(0, std::memory_order_relaxed);
  in_.contexts[i].rndv_done.store(0, std::memory_order_release);
  return pack_context(i, c.gen);
}

void PeerChannel::close_in(uint32_t ctx) {
  std::lock_guard<SpinLock> lock(recv_mu_);
  InContext& c = *ins_[context_index(ctx)];
  release(c);  // its communicator is done: so is its data engine
  c.open = false;
  ++c.gen;  // slots still on their way to the old context are dropped
  c.aside.clear();
  // Freed, not emptied (`bounce = {}` assigns an empty list and keeps the
  // capacity): the next communicator to get this number may never reduce from
  // this peer, and a family reuses up to kMaxContexts numbers per channel.
  std::vector<unsigned char>().swap(c.bounce);
}

size_t PeerChannel::held_bytes() {
  std::lock_guard<SpinLock> lock(recv_mu_);
  size_t n = 0;
  for (const auto& c : ins_) {
    n += c->bounce.capacity();
    for (const SetAside& a : c->aside) n += a.payload.capacity();
    for (const auto& k : c->kept) n += k.capacity();
  }
  return n;
}

PeerChannel::OutContext* PeerChannel::open_out(uint32_t remote) {
  std::lock_guard<SpinLock> lock(send_mu_);
  size_t h = 0;
  while (h < outs_.size() && outs_[h]->open) ++h;
  if (h == outs_.size()) outs_.push_back(std::make_unique<OutContext>());
  OutContext& c = *outs_[h];
  c = OutContext{};
  c.index = static_cast<uint16_t>(context_index(remote));
  c.gen = context_gen(remote);
  c.open = true;
  return &c;
}

void PeerChannel::close_out(OutContext* out) {
  std::lock_guard<SpinLock> lock(send_mu_);
  OutContext& c = *out;
  c.open = false;
  c.queue.clear();
}

// ---- sending -------------------------------------------------------------

bool PeerChannel::slot_free(OutContext& c) {
  const size_t n = out_.layout.nslots;
  if (sent_slots_ - cached_head_ >= n) {
    cached_head_ = out_.head->value.load(std::memory_order_acquire);
    if (sent_slots_ - cached_head_ >= n) return false;
  }
  if (c.posted - c.cached_consumed < n) return true;
  c.cached_consumed = out_.contexts[c.index].consumed.load(std::memory_order_acquire);
  return c.posted - c.cached_consumed < n;
}

void PeerChannel::post_slot(OutContext& c, const SendItem& item, uint32_t kind, const void* payload,
                            size_t bytes) {
  SlotHeader* h = out_.header(sent_slots_);
  h->tag = item.tag;
  h->msg_bytes = item.bytes;
  h->bytes = static_cast<uint32_t>(bytes);
  h->kind = static_cast<uint8_t>(kind);
  h->gen = c.gen;
  h->ctx = c.index;
  // An empty message may come with a null buffer (a count-0 call): nothing to copy.
  void* to = bytes <= kInlineBytes ? static_cast<void*>(h->inline_data) : static_cast<void*>(out_.payload(sent_slots_));
  const bool full = bytes == out_.layout.slot_bytes && item.bytes > bytes;
  if (full && opts_.stream != SlotCopy::Mode::Cached) {
    if (opts_.stream == SlotCopy::Mode::Auto) {
      slot_copy_.reader_costs(from_fixed(out_.head->read_cost[0].load(std::memory_order_relaxed)),
                              from_fixed(out_.head->read_cost[1].load(std::memory_order_relaxed)));
      h->kind |= kTimedStores;
    }
    if (slot_copy_.copy(to, payload, bytes)) h->kind |= kStreamedStores;
  } else if (bytes > 0) {
    std::memcpy(to, payload, bytes);
  }
  h->seq.store(sent_slots_ + 1, std::memory_order_release);
  ++sent_slots_;
  ++c.posted;
}

uint64_t PeerChannel::send(OutContext* out, const void* data, size_t bytes, uint64_t tag) {
  std::lock_guard<SpinLock> lock(send_mu_);
  OutContext& c = *out;
  SendItem item{static_cast<const unsigned char*>(data), bytes, tag, c.next_ticket++};
  if (opts_.cma && bytes > opts_.eager_max) {
    Region r;
    item.rndv = opts_.cma_private || find_region(data, bytes, &r);
  }
  // The common small message goes straight into a free slot: nothing queued,
  // so send_done() sees it done.
  if (c.queue.empty() && !item.rndv && bytes <= out_.layout.slot_bytes && slot_free(c)) {
    post_slot(c, item, kEager, data, bytes);
    return item.ticket;
  }
  c.queue.push_back(item);
  progress_locked(c);
  return item.ticket;
}

// A context's queue is its owner's alone: only posting slots takes the lock.
void PeerChannel::progress(OutContext* out) {
  OutContext& c = *out;
  if (c.queue.empty()) return;
  std::lock_guard<SpinLock> lock(send_mu_);
  progress_locked(c);
}

void PeerChannel::progress_locked(OutContext& c) {
  // A context's messages are posted strictly in order: a later one waits for
  // slots behind an earlier one. Contexts do not wait for each other.
  for (SendItem& item : c.queue) {
    if (item.rndv) {
      if (item.header_posted) continue;
      if (!slot_free(c)) return;
      RndvDescriptor d{};
      d.addr = reinterpret_cast<uint64_t>(item.data);
      Region r;
      if (find_region(item.data, item.bytes, &r)) {
        d.region_base = r.base;
        d.region_size = r.size;
        d.region_ino = r.ino;
        d.region_fd = r.fd;
      }
      item.rndv_seq = ++c.rndv_posted;
      post_slot(c, item, kRndv, &d, sizeof(d));
      item.header_posted = true;
      continue;
    }
    while (item.posted < item.bytes || !item.header_posted) {
      if (!slot_free(c)) return;
      size_t n = std::min(item.bytes - item.posted, out_.layout.slot_bytes);
      post_slot(c, item, kEager, item.data + item.posted, n);
      item.posted += n;
      item.header_posted = true;
    }
  }
  while (!c.queue.empty() && item_done(c, c.queue.front())) c.queue.pop_front();
}

bool PeerChannel::item_done(const OutContext& c, const SendItem& item) const {
  if (!item.header_posted) return false;
  if (!item.rndv) return item.posted == item.bytes;
  return out_.contexts[c.index].rndv_done.load(std::memory_order_acquire) >= item.rndv_seq;
}

bool PeerChannel::send_done(OutContext* out, uint64_t ticket) {
  OutContext& c = *out;
  if (c.queue.empty() || ticket < c.queue.front().ticket) return true;
  std::lock_guard<SpinLock> lock(send_mu_);
  progress_locked(c);
  if (c.queue.empty() || ticket < c.queue.front().ticket) return true;
  for (const SendItem& item : c.queue)
    if (item.ticket == ticket) return item_done(c, item);
  return true;
}

// ---- receiving -----------------------------------------------------------

bool PeerChannel::deliver(transport::RecvOp& op, const void* piece, size_t offset, size_t bytes) {
  if (op.consumer != nullptr) return op.consumer->consume(piece, offset, bytes);
  if (bytes > 0) std::memcpy(static_cast<unsigned char*>(op.dst) + offset, piece, bytes);  // dst may be null then
  return true;
}

Status PeerChannel::wait_released(transport::RecvOp& op, int peer) {
  if (op.consumer == nullptr || op.consumer->released()) return Status::Ok();
  Deadline deadline = Deadline::after_ms(params::TIMEOUT_MS());
  SpinWait spin;
  while (!op.consumer->released()) {
    if (deadline.expired())
      return Error(weftTimeout, "the data engine did not finish reading a piece of a %zu-byte message from rank %d "
                                "within WEFT_TIMEOUT_MS", op.bytes, peer);
    spin.pause();
  }
  return Status::Ok();
}

void PeerChannel::take_slot() {
  ++recv_slots_;
  if (holders_ == 0) in_.head->value.store(recv_slots_, std::memory_order_release);
}

void PeerChannel::release(InContext& c) {
  c.holding = false;
  c.kept.clear();
  if (c.holds_slot) {
    c.holds_slot = false;
    if (--holders_ == 0) in_.head->value.store(recv_slots_, std::memory_order_release);
  }
}

void PeerChannel::set_aside(const SlotHeader* h, const void* payload) {
  size_t i = h->ctx;
  if (i >= ins_.size() || !ins_[i]->open || ins_[i]->gen != h->gen) return;  // a closed context's: dropped
  // A malformed slot keeps its header only; its context fails on it.
  const uint32_t bytes = slot_sane(h->kind, h->bytes, in_.layout.slot_bytes) ? h->bytes : 0;
  const auto* p = static_cast<const unsigned char*>(slot_data(h, static_cast<const unsigned char*>(payload)));
  ins_[i]->aside.push_back({h->tag, h->msg_bytes, h->bytes, h->kind, std::vector<unsigned char>(p, p + bytes)});
}

Status PeerChannel::pull(const RndvDescriptor& d, InContext& c, transport::RecvOp& op, int peer) {
  // A region must hold the whole message (a descriptor saying otherwise would make
  // us read outside the mapping); else the kernel checks each read below.
  if (d.region_base != 0 && d.addr >= d.region_base && op.bytes <= d.region_size &&
      d.addr - d.region_base <= d.region_size - op.bytes) {
    Region r{d.region_base, d.region_size, d.region_ino, d.region_fd};
    std::lock_guard<std::mutex> lock(map_mu_);  // the mapping stays while we read it
    if (const void* p = mappings_.map(r, d.addr)) {
      // The mapping and the sender's buffer stay until the consumer has read them.
      return deliver(op, p, 0, op.bytes) ? Status::Ok() : wait_released(op, peer);
    }
  }
  // Plain receives land directly in the destination; reductions go through a
  // cache-sized bounce buffer so the reduce reads hot data.
  size_t piece = op.consumer != nullptr ? opts_.pull_bytes : op.bytes;
  if (op.consumer != nullptr && c.bounce.size() < piece) c.bounce.resize(piece);
  for (size_t off = 0; off < op.bytes;) {
    size_t n = std::min(piece, op.bytes - off);
    unsigned char* local = op.consumer != nullptr ? c.bounce.data() : static_cast<unsigned char*>(op.dst) + off;
    size_t got = 0;
    while (got < n) {
      struct iovec l{local + got, n - got};
      struct iovec r{reinterpret_cast<void*>(d.addr + off + got), n - got};
      ssize_t rc = process_vm_readv(peer_pid_, &l, 1, &r, 1, 0);
      if (rc < 0) {
        if (errno == EINTR) continue;
        if (errno == ESRCH || errno == EFAULT)
          return Error(weftRemoteError, "peer rank %d (pid %d) exited or released its buffer while we read it", peer,
                       peer_pid_);
        return SysError(errno, "reading %zu bytes from peer rank %d (pid %d) with process_vm_readv", n - got, peer,
                        peer_pid_);
      }
      if (rc == 0)
        return Error(weftRemoteError, "peer rank %d (pid %d) buffer vanished during the read", peer, peer_pid_);
      got += static_cast<size_t>(rc);
    }
    if (op.consumer != nullptr && !op.consumer->consume(local, off, n)) WEFT_TRY(wait_released(op, peer));
    off += n;
  }
  return Status::Ok();
}

Status PeerChannel::poll_recv(uint32_t in, transport::RecvOp& op, bool* complete, int peer) {
  *complete = false;
  // Another thread polling this channel moves our slots aside for us.
  std::unique_lock<SpinLock> lock(recv_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return Status::Ok();
  const size_t index = context_index(in);
  InContext& c = *ins_[index];
  ContextCounters& counters = in_.contexts[index];
  if (c.holding) {
    if (!op.consumer->released()) return Status::Ok();
    release(c);
    if (op.started && op.done == op.bytes) {
      *complete = true;
      return Status::Ok();
    }
  }
  for (;;) {
    // This context's next slot: one moved aside earlier, else the FIFO's head.
    uint64_t tag, msg_bytes;
    uint32_t bytes, kind;
    const void* data;
    SlotHeader* h = nullptr;
    if (!c.aside.empty()) {
      const SetAside& s = c.aside.front();
      tag = s.tag, msg_bytes = s.msg_bytes, bytes = s.bytes, kind = s.kind, data = s.payload.data();
    } else {
      h = in_.header(recv_slots_);
      if (h->seq.load(std::memory_order_acquire) != recv_slots_ + 1) return Status::Ok();
      if (h->ctx != index || h->gen != c.gen) {
        set_aside(h, in_.payload(recv_slots_));
        take_slot();
        continue;
      }
      tag = h->tag, msg_bytes = h->msg_bytes, bytes = h->bytes, kind = h->kind;
      data = slot_data(h, in_.payload(recv_slots_));
    }
    if (!slot_sane(kind, bytes, in_.layout.slot_bytes))
      return Error(weftRemoteError,
                   "rank %d (pid %d) wrote a malformed shared-memory slot (kind %u, %u bytes; a slot holds %zu): "
                   "its process is not running this build of weft, or its memory is corrupt",
                   peer, peer_pid_, kind, bytes, in_.layout.slot_bytes);
    const uint32_t stores = kind & ~uint32_t{kKindMask};  // kTimedStores, kStreamedStores
    kind &= kKindMask;
    if (!op.started) {
      if (tag != op.tag || msg_bytes != op.bytes)
        return Error(weftInvalidUsage,
                     "mismatched calls: expected a %zu-byte message (tag %#llx) from rank %d, "
                     "received %llu bytes (tag %#llx); do all ranks call the same collectives "
                     "with the same count and datatype?",
                     op.bytes, static_cast<unsigned long long>(op.tag), peer,
                     static_cast<unsigned long long>(msg_bytes), static_cast<unsigned long long>(tag));
      op.started = true;
    }
    RndvDescriptor d;
    bool kept = false;
    if (kind == kRndv) {
      std::memcpy(&d, data, sizeof(d));
    } else if (bytes > op.bytes - op.done) {
      return Error(weftRemoteError,
                   "rank %d (pid %d) sent %u bytes more of a %zu-byte message of which %zu had arrived: "
                   "its process is not running this build of weft, or its memory is corrupt",
                   peer, peer_pid_, bytes, op.bytes, op.done);
    } else {
      // The sender chose a timed slot's stores by its own timing: what reading
      // the slot costs us is the other half of that choice (slot_copy.h).
      const bool timed = h != nullptr && (stores & kTimedStores);
      const uint64_t t0 = timed ? ticks() : 0;
      kept = !deliver(op, data, op.done, bytes);
      if (timed) {
        const int streamed = (stores & kStreamedStores) ? 1 : 0;
        read_cost_[streamed].add(ticks() - t0, bytes);
        in_.head->read_cost[streamed].store(to_fixed(read_cost_[streamed].value()), std::memory_order_relaxed);
      }
      op.done += bytes;
    }
    // The slot is consumed (a kept one stays taken until the consumer is done).
    if (kept) {
      c.holding = true;
      if (h == nullptr) c.kept.push_back(std::move(c.aside.front().payload));
      else if (!c.holds_slot) {
        c.holds_slot = true;
        ++holders_;
      }
    }
    if (h != nullptr) take_slot();
    else c.aside.pop_front();
    counters.consumed.store(++c.consumed, std::memory_order_release);
    if (kind == kRndv) {
      // Read in place without holding up other contexts' polls.
      lock.unlock();
      Status st = pull(d, c, op, peer);
      // Release the sender even on failure, so it cannot wait forever on us.
      counters.rndv_done.store(++c.rndv_received, std::memory_order_release);
      WEFT_TRY(st);
      op.done = op.bytes;
    }
    if (c.holding) return Status::Ok();  // no further until the consumer is done
    if (op.done == op.bytes) {
      *complete = true;
      return Status::Ok();
    }
  }
}

void PeerChannel::peek(uint32_t in, transport::NextMessage* next) {
  next->arrived = false;
  std::unique_lock<SpinLock> lock(recv_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  InContext& c = *ins_[context_index(in)];
  if (!c.aside.empty()) {
    *next = {true, c.aside.front().tag, c.aside.front().msg_bytes};
    return;
  }
  for (;;) {
    SlotHeader* h = in_.header(recv_slots_);
    if (h->seq.load(std::memory_order_acquire) != recv_slots_ + 1) return;
    if (h->ctx == context_index(in) && h->gen == c.gen) {
      *next = {true, h->tag, h->msg_bytes};
      return;
    }
    set_aside(h, in_.payload(recv_slots_));
    take_slot();
  }
}

double PeerChannel::read_cost(bool streamed) const {
  return from_fixed(in_.head->read_cost[streamed ? 1 : 0].load(std::memory_order_relaxed));
}

Status PeerChannel::check_peer(int peer) {
  if (pidfd_ < 0) return Status::Ok();
  struct pollfd p{pidfd_, POLLIN, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
    return Error(weftRemoteError, "peer rank %d (pid %d) exited", peer, peer_pid_);
  return Status::Ok();
}

}  // namespace weft::shm
