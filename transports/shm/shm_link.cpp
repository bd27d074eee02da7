#include "transports/shm/shm_link.h"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace weft::shm {

ShmLink::ShmLink(int peer, pid_t peer_pid, ChannelView out, ChannelView in, LinkOptions opts)
    : Link(peer), peer_pid_(peer_pid), out_(out), in_(in), opts_(opts), mappings_(peer_pid) {
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, peer_pid, 0));
}

ShmLink::~ShmLink() {
  if (pidfd_ >= 0) close(pidfd_);
}

// ---- sending -------------------------------------------------------------

bool ShmLink::slot_free() {
  if (sent_slots_ - cached_head_ < out_.layout.nslots) return true;
  cached_head_ = out_.head->value.load(std::memory_order_acquire);
  return sent_slots_ - cached_head_ < out_.layout.nslots;
}

void ShmLink::post_slot(const SendItem& item, uint32_t kind, const void* payload, size_t bytes) {
  SlotHeader* h = out_.header(sent_slots_);
  h->tag = item.tag;
  h->msg_bytes = item.bytes;
  h->bytes = static_cast<uint32_t>(bytes);
  h->kind = kind;
  if (bytes <= kInlineBytes) std::memcpy(h->inline_data, payload, bytes);
  else std::memcpy(out_.payload(sent_slots_), payload, bytes);
  h->seq.store(sent_slots_ + 1, std::memory_order_release);
  ++sent_slots_;
}

uint64_t ShmLink::send(const void* data, size_t bytes, uint64_t tag) {
  SendItem item{static_cast<const unsigned char*>(data), bytes, tag, next_ticket_++};
  if (opts_.cma && bytes > opts_.eager_max) {
    Region r;
    item.rndv = opts_.cma_private || find_region(data, bytes, &r);
  }
  // The common small message goes straight into a free slot: nothing queued,
  // so send_done() sees it done.
  if (queue_.empty() && !item.rndv && bytes <= out_.layout.slot_bytes && slot_free()) {
    post_slot(item, kEager, data, bytes);
    return item.ticket;
  }
  queue_.push_back(item);
  progress();
  return item.ticket;
}

void ShmLink::progress() {
  // Messages are posted strictly in order: a later one waits for slots behind
  // an earlier one.
  for (SendItem& item : queue_) {
    if (item.rndv) {
      if (item.header_posted) continue;
      if (!slot_free()) return;
      RndvDescriptor d{};
      d.addr = reinterpret_cast<uint64_t>(item.data);
      Region r;
      if (find_region(item.data, item.bytes, &r)) {
        d.region_base = r.base;
        d.region_size = r.size;
        d.region_ino = r.ino;
        d.region_fd = r.fd;
      }
      item.rndv_seq = ++rndv_posted_;
      post_slot(item, kRndv, &d, sizeof(d));
      item.header_posted = true;
      continue;
    }
    while (item.posted < item.bytes || !item.header_posted) {
      if (!slot_free()) return;
      size_t n = std::min(item.bytes - item.posted, out_.layout.slot_bytes);
      post_slot(item, kEager, item.data + item.posted, n);
      item.posted += n;
      item.header_posted = true;
    }
  }
  while (!queue_.empty() && item_done(queue_.front())) queue_.pop_front();
}

bool ShmLink::item_done(const SendItem& item) const {
  if (!item.header_posted) return false;
  if (!item.rndv) return item.posted == item.bytes;
  return out_.rndv_done->value.load(std::memory_order_acquire) >= item.rndv_seq;
}

bool ShmLink::send_done(uint64_t ticket) {
  if (queue_.empty() || ticket < queue_.front().ticket) return true;
  progress();
  if (queue_.empty() || ticket < queue_.front().ticket) return true;
  for (const SendItem& item : queue_)
    if (item.ticket == ticket) return item_done(item);
  return true;
}

// ---- receiving -----------------------------------------------------------

void ShmLink::deliver(transport::RecvOp& op, const void* piece, size_t offset, size_t bytes) {
  if (op.consumer != nullptr) op.consumer->consume(piece, offset, bytes);
  else std::memcpy(static_cast<unsigned char*>(op.dst) + offset, piece, bytes);
}

Status ShmLink::pull(const RndvDescriptor& d, transport::RecvOp& op) {
  if (d.region_base != 0) {
    Region r{d.region_base, d.region_size, d.region_ino, d.region_fd};
    if (const void* p = mappings_.map(r, d.addr)) {
      deliver(op, p, 0, op.bytes);
      return Status::Ok();
    }
  }
  // Plain receives land directly in the destination; reductions go through a
  // cache-sized bounce buffer so the reduce reads hot data.
  size_t piece = op.consumer != nullptr ? opts_.pull_bytes : op.bytes;
  if (op.consumer != nullptr && bounce_.size() < piece) bounce_.resize(piece);
  for (size_t off = 0; off < op.bytes;) {
    size_t n = std::min(piece, op.bytes - off);
    unsigned char* local = op.consumer != nullptr ? bounce_.data()
                                                  : static_cast<unsigned char*>(op.dst) + off;
    size_t got = 0;
    while (got < n) {
      struct iovec l{local + got, n - got};
      struct iovec r{reinterpret_cast<void*>(d.addr + off + got), n - got};
      ssize_t rc = process_vm_readv(peer_pid_, &l, 1, &r, 1, 0);
      if (rc < 0) {
        if (errno == EINTR) continue;
        if (errno == ESRCH || errno == EFAULT)
          return Error(weftRemoteError,
                       "peer rank %d (pid %d) exited or released its buffer while we read it",
                       peer(), peer_pid_);
        return SysError(errno, "reading %zu bytes from peer rank %d (pid %d) with process_vm_readv",
                        n - got, peer(), peer_pid_);
      }
      if (rc == 0)
        return Error(weftRemoteError, "peer rank %d (pid %d) buffer vanished during the read", peer(),
                     peer_pid_);
      got += static_cast<size_t>(rc);
    }
    if (op.consumer != nullptr) op.consumer->consume(local, off, n);
    off += n;
  }
  return Status::Ok();
}

Status ShmLink::poll_recv(transport::RecvOp& op, bool* complete) {
  *complete = false;
  for (;;) {
    SlotHeader* h = in_.header(recv_slots_);
    if (h->seq.load(std::memory_order_acquire) != recv_slots_ + 1) return Status::Ok();
    if (!op.started) {
      if (h->tag != op.tag || h->msg_bytes != op.bytes)
        return Error(weftInvalidUsage,
                     "mismatched calls: expected a %zu-byte message (tag %#llx) from rank %d, "
                     "received %llu bytes (tag %#llx); do all ranks call the same collectives "
                     "with the same count and datatype?",
                     op.bytes, static_cast<unsigned long long>(op.tag), peer(),
                     static_cast<unsigned long long>(h->msg_bytes),
                     static_cast<unsigned long long>(h->tag));
      op.started = true;
    }
    if (h->kind == kRndv) {
      RndvDescriptor d;
      std::memcpy(&d, in_.payload(recv_slots_), sizeof(d));
      in_.head->value.store(++recv_slots_, std::memory_order_release);
      Status st = pull(d, op);
      // Release the sender even on failure, so it cannot wait forever on us.
      in_.rndv_done->value.store(++rndv_received_, std::memory_order_release);
      WEFT_TRY(st);
      op.done = op.bytes;
    } else {
      const void* src = h->bytes <= kInlineBytes ? static_cast<const void*>(h->inline_data)
                                                 : in_.payload(recv_slots_);
      deliver(op, src, op.done, h->bytes);
      op.done += h->bytes;
      in_.head->value.store(++recv_slots_, std::memory_order_release);
    }
    if (op.done == op.bytes) {
      *complete = true;
      return Status::Ok();
    }
  }
}

Status ShmLink::check_peer() {
  if (pidfd_ < 0) return Status::Ok();
  struct pollfd p{pidfd_, POLLIN, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
    return Error(weftRemoteError, "peer rank %d (pid %d) exited", peer(), peer_pid_);
  return Status::Ok();
}

}  // namespace weft::shm
