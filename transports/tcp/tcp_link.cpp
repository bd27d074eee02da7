#include "transports/tcp/tcp_link.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace weft::tcp {
namespace {

// Reduction pieces are handed on in multiples of this (elements never straddle
// a piece) and, before a slice is complete, only once this many bytes are
// ready: tiny pieces would cost more in calls than they save in latency.
constexpr size_t kAlign = 64;
constexpr size_t kMinPiece = 32768;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

size_t largest_slice(const LinkOptions& o) {
  return std::max(o.max_slice, round_up(std::max<size_t>(o.min_slice, kAlign), kAlign));
}

TcpLink::TcpLink(int peer, std::shared_ptr<Connection> conn, uint64_t ctx, LinkOptions opts)
    : Link(peer), conn_(std::move(conn)), ctx_(ctx), opts_(opts), in_(conn_->nsocks()) {
  opts_.min_slice = round_up(std::max<size_t>(opts_.min_slice, kAlign), kAlign);
  opts_.max_slice = largest_slice(opts_);
  conn_->open(ctx_);
}

TcpLink::~TcpLink() { conn_->close(ctx_); }

Status TcpLink::fail(Status st) {
  if (error_.ok()) error_ = st;
  return error_;
}

Status TcpLink::conn_error() {
  Connection::Fault f = conn_->fault();
  if (f.code == weftSuccess) return Status::Ok();
  return Error(f.code, "peer rank %d at %s %s", peer(), peer_addr().c_str(), f.what.c_str());
}

// ---- sending -------------------------------------------------------------

uint64_t TcpLink::send(const void* data, size_t bytes, uint64_t tag) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t n = in_.size();
  // One slice per socket, but none smaller than min_slice nor larger than
  // max_slice; a zero-byte message is one empty frame.
  size_t slice = round_up((bytes + n - 1) / n, kAlign);
  slice = std::clamp(slice, opts_.min_slice, opts_.max_slice);
  size_t nslices = bytes == 0 ? 1 : (bytes + slice - 1) / slice;
  uint64_t ticket = next_ticket_++;
  uint64_t seq = send_seq_++;
  for (size_t k = 0; k < nslices; ++k) {
    size_t off = k * slice;
    size_t len = std::min(slice, bytes - off);
    OutFrame f{};
    f.h = FrameHeader{kFrameMagic, static_cast<uint32_t>(len), seq, tag, bytes, off, ctx_};
    f.payload = p + off;
    f.ticket = ticket;
    f.sock = next_sock_;
    out_.push_back(f);
    next_sock_ = (next_sock_ + 1) % n;
  }
  pending_.push_back({ticket, nslices});
  progress();
  return ticket;
}

void TcpLink::frame_sent(uint64_t ticket) {
  for (Pending& p : pending_)
    if (p.ticket == ticket) {
      --p.frames_left;
      break;
    }
  while (!pending_.empty() && pending_.front().frames_left == 0) pending_.pop_front();
}

void TcpLink::write_frames() {
  while (!out_.empty()) {
    const OutFrame& f = out_.front();
    uint64_t id = 0;
    Connection::Put put = conn_->put(f.sock, f.h, f.payload, &id);
    if (put == Connection::Put::Later) return;
    if (put == Connection::Put::Written) frame_sent(f.ticket);
    else tails_.push_back({f.sock, id, f.ticket});
    out_.pop_front();
  }
}

void TcpLink::progress() {
  for (size_t k = 0; k < tails_.size();) {
    if (conn_->written(tails_[k].sock, tails_[k].id)) {
      frame_sent(tails_[k].ticket);
      tails_.erase(tails_.begin() + static_cast<long>(k));
    } else {
      ++k;
    }
  }
  write_frames();
  conn_->pump(ctx_);
}

// The frames not yet started are dropped; the connection copies the rest of
// those it has started, since other contexts' frames follow them.
void TcpLink::abandon_sends() {
  out_.clear();
  for (const Tail& t : tails_) conn_->keep(t.sock, t.id);
  tails_.clear();
  pending_.clear();
}

bool TcpLink::send_done(uint64_t ticket) {
  progress();
  if (pending_.empty() || ticket < pending_.front().ticket) return true;
  for (const Pending& p : pending_)
    if (p.ticket == ticket) return p.frames_left == 0;
  return true;
}

// ---- receiving -----------------------------------------------------------

// Reads up to n bytes; *got = 0 when nothing is available. The connection
// fails a close in the middle of a frame; at a frame boundary the socket is
// marked eof.
Status TcpLink::read_some(size_t i, void* buf, size_t n, size_t* got) {
  bool eof = false;
  conn_->read(ctx_, i, buf, n, got, &eof);
  bytes_in_ += *got;
  if (eof) in_[i].eof = true;
  return *got > 0 || eof ? Status::Ok() : conn_error();
}

Status TcpLink::read_header(size_t i) {
  InSock& s = in_[i];
  while (!s.eof && s.state == In::Header) {
    size_t got = 0;
    WEFT_TRY(read_some(i, reinterpret_cast<unsigned char*>(&s.h) + s.hdr_got, sizeof(FrameHeader) - s.hdr_got, &got));
    if (got == 0) return Status::Ok();
    s.hdr_got += got;
    if (s.hdr_got == sizeof(FrameHeader)) s.state = In::Ready;  // the connection checked it
  }
  return Status::Ok();
}

// Any socket may carry the next message's first frame: each frame names the
// whole message's tag and size.
Status TcpLink::peek(transport::NextMessage* next) {
  next->arrived = false;
  WEFT_TRY(error_);
  WEFT_TRY(conn_error());
  uint64_t in_before = bytes_in_;
  for (size_t i = 0; i < in_.size(); ++i) {
    WEFT_TRY(read_header(i));
    const InSock& s = in_[i];
    if (s.state == In::Ready && s.h.seq == recv_seq_) {
      *next = {true, s.h.tag, static_cast<size_t>(s.h.msg_bytes)};
      return Status::Ok();
    }
  }
  idle_wait(in_before);
  return conn_error();
}

// Moves socket i forward as far as its data and the current receive allow.
Status TcpLink::pump(size_t i, transport::RecvOp& op) {
  InSock& s = in_[i];
  for (;;) {
    if (s.eof) return Status::Ok();
    if (s.state == In::Header) {
      WEFT_TRY(read_header(i));
      if (s.state == In::Header) return Status::Ok();
    }
    if (s.state == In::Ready) {
      if (s.h.seq > recv_seq_) return Status::Ok();  // a later message; wait for its receive
      if (s.h.seq < recv_seq_)
        return fail(Error(weftRemoteError,
                          "from peer rank %d at %s (socket %zu): frame of message %llu while "
                          "expecting message %llu (a stale or repeated frame)",
                          peer(), peer_addr().c_str(), i, static_cast<unsigned long long>(s.h.seq),
                          static_cast<unsigned long long>(recv_seq_)));
      if (s.h.tag != op.tag || s.h.msg_bytes != op.bytes)
        return fail(Error(weftInvalidUsage,
                          "mismatched calls: expected a %zu-byte message (tag %#llx) from rank "
                          "%d, received %llu bytes (tag %#llx); do all ranks call the same "
                          "collectives with the same count and datatype?",
                          op.bytes, static_cast<unsigned long long>(op.tag), peer(),
                          static_cast<unsigned long long>(s.h.msg_bytes),
                          static_cast<unsigned long long>(s.h.tag)));
      op.started = true;
      s.state = In::Body;
      s.body_got = 0;
      s.delivered = 0;
      if (op.consumer != nullptr && s.bounce.size() < s.h.slice_bytes) s.bounce.resize(s.h.slice_bytes);
    }
    if (s.state == In::Body) {
      size_t left = s.h.slice_bytes - s.body_got;
      if (left > 0) {
        unsigned char* dst = op.consumer != nullptr
                                 ? s.bounce.data() + s.body_got
                                 : static_cast<unsigned char*>(op.dst) + s.h.offset + s.body_got;
        size_t got = 0;
        WEFT_TRY(read_some(i, dst, left, &got));
        if (got == 0) return Status::Ok();
        s.body_got += got;
        if (op.consumer == nullptr) op.done += got;
        if (s.body_got < s.h.slice_bytes) continue;
      }
      if (op.consumer == nullptr || s.h.slice_bytes == 0) {
        s.state = In::Header;
        s.hdr_got = 0;
        if (op.done == op.bytes) return Status::Ok();  // the rest belongs to later messages
        continue;
      }
      s.state = In::Held;
    }
    if (s.state == In::Held) return Status::Ok();  // waits for deliver_in_order
  }
}

// Hands the consumer every byte that is next in offset order; true if any moved.
bool TcpLink::deliver_in_order(transport::RecvOp& op) {
  bool moved = false;
  for (bool again = true; again;) {
    again = false;
    for (InSock& s : in_) {
      if ((s.state != In::Body && s.state != In::Held) || s.h.offset + s.delivered != op.done)
        continue;
      bool whole = s.body_got == s.h.slice_bytes;
      size_t ready = whole ? s.body_got : s.body_got / kAlign * kAlign;
      if (ready <= s.delivered || (!whole && ready - s.delivered < kMinPiece)) continue;
      held_ = !op.consumer->consume(s.bounce.data() + s.delivered, op.done, ready - s.delivered);
      op.done += ready - s.delivered;
      s.delivered = ready;
      moved = true;
      if (whole) {
        s.state = In::Header;
        s.hdr_got = 0;
        again = !held_;
      }
      if (held_) return moved;
    }
  }
  return moved;
}

Status TcpLink::poll_recv(transport::RecvOp& op, bool* complete) {
  *complete = false;
  WEFT_TRY(error_);
  WEFT_TRY(conn_error());
  if (held_) {
    if (!op.consumer->released()) return Status::Ok();
    held_ = false;
  }
  uint64_t in_before = bytes_in_;
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (size_t i = 0; i < in_.size(); ++i) {
      WEFT_TRY(pump(i, op));
      if (op.started && op.done == op.bytes) break;
    }
    if (op.consumer != nullptr) progressed = deliver_in_order(op);
    if (held_) return Status::Ok();  // complete, if it is, once the consumer is done
    if (op.started && op.done == op.bytes) {
      ++recv_seq_;
      *complete = true;
      return Status::Ok();
    }
  }
  // Nothing more can arrive for this message if every socket is closed or
  // already holds a later message, and one of them is closed.
  bool any_eof = false, all_stuck = true;
  for (const InSock& s : in_) {
    any_eof |= s.eof;
    if (!s.eof && !(s.state == In::Ready && s.h.seq > recv_seq_)) all_stuck = false;
  }
  if (any_eof && all_stuck) conn_->closed();
  idle_wait(in_before);
  return conn_error();
}

// After spin_polls empty polls in a row, wait in ppoll() for the sockets
// (readable, or writable where frames are queued) for at most block_us
// instead of returning at once. A rank that spins on recv() burns the CPU its
// peer and the kernel's network stack need when cores are oversubscribed;
// ppoll returns as soon as data arrives, so the cost when cores are free is
// one wake-up, and block_us bounds how long this rank's other links go
// without progress.
void TcpLink::idle_wait(uint64_t in_before) {
  if (opts_.block_us <= 0) return;
  if (bytes_in_ != in_before) {
    idle_polls_ = 0;
    return;
  }
  if (++idle_polls_ < opts_.spin_polls) return;
  conn_->wait(ctx_, opts_.block_us, !tails_.empty() || !out_.empty());
}

Status TcpLink::check_peer() {
  WEFT_TRY(error_);
  conn_->check(ctx_);
  return conn_error();
}

}  // namespace weft::tcp
