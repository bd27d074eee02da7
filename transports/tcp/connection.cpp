#include "transports/tcp/connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace weft::tcp {
namespace {

constexpr size_t kHeader = sizeof(FrameHeader);

bool connection_lost(int err) { return err == EPIPE || err == ECONNRESET || err == ETIMEDOUT || err == EHOSTUNREACH; }

std::string on_socket(const char* what, size_t i, const std::string& detail = {}) {
  return std::string(what) + " (socket " + std::to_string(i) + ")" + (detail.empty() ? "" : ": " + detail);
}

}  // namespace

Connection::Connection(std::string peer_addr, std::vector<boot::Fd> socks, size_t max_slice)
    : peer_addr_(std::move(peer_addr)), socks_(std::move(socks)), max_slice_(max_slice),
      window_(kWindowSlices * (max_slice + kHeader)), in_(socks_.size()), out_(socks_.size()) {}

Connection::Context* Connection::find(uint64_t ctx) {
  auto it = contexts_.find(ctx);
  return it == contexts_.end() ? nullptr : &it->second;
}

void Connection::open(uint64_t ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  contexts_[ctx].aside.resize(socks_.size());
}

void Connection::close(uint64_t ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < out_.size(); ++i) {
    OutSock& o = out_[i];
    if (o.busy && o.h.context == ctx && o.counted && o.payload != o.kept.data() && o.h.slice_bytes > 0) {
      // The rest of this frame is in memory that is going away, and no other
      // frame may follow a cut one on this socket.
      WEFT_WARN(TRANSPORT, "tcp: a communicator closed while its frame to %s was part written: closing the connection",
                peer_addr_.c_str());
      failed(weftInternalError, on_socket("was cut off: a communicator closed in the middle of a frame", i));
      for (boot::Fd& s : socks_) ::shutdown(s.get(), SHUT_RDWR);
      o.busy = false;
    }
  }
  contexts_.erase(ctx);
  std::erase_if(controls_, [&](const auto& k) { return k.first == ctx; });
}

// ---- sending ---------------------------------------------------------------

size_t Connection::write(size_t i, const FrameHeader& h, const unsigned char* payload, size_t sent) {
  const size_t total = kHeader + h.slice_bytes;
  while (sent < total && error_.code == weftSuccess && lost_.code == weftSuccess) {
    iovec iov[2];
    int n = 0;
    if (sent < kHeader) {
      iov[n++] = {const_cast<char*>(reinterpret_cast<const char*>(&h)) + sent, kHeader - sent};
      if (h.slice_bytes > 0) iov[n++] = {const_cast<unsigned char*>(payload), h.slice_bytes};
    } else {
      iov[n++] = {const_cast<unsigned char*>(payload) + (sent - kHeader), total - sent};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t rc = ::sendmsg(socks_[i].get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (rc >= 0) {
      sent += static_cast<size_t>(rc);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    int err = errno;
    if (connection_lost(err)) lost(on_socket("is unreachable", i, std::strerror(err)));
    else failed(weftSystemError, on_socket("could not be written to", i, std::strerror(err)));
  }
  // A frame's last partial segment may be held back by the kernel's autocorking
  // while the socket's earlier segments sit in a queue (a shaping qdisc, a busy
  // NIC), to go when they are sent, which the kernel learns in a softirq: with
  // ranks spinning on every core that can take tens of ms (recursive doubling at
  // 64 KiB, 4 hosts x 2 ranks on 2 cores behind a token bucket: 4-15 ms per call
  // instead of 1.1). Setting TCP_NODELAY again pushes it out now.
  if (sent == total) {
    const int one = 1;
    (void)setsockopt(socks_[i].get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return sent;
}

bool Connection::finish(size_t i) {
  OutSock& o = out_[i];
  if (!o.busy) return true;
  o.sent = write(i, o.h, o.payload, o.sent);
  if (o.sent < kHeader + o.h.slice_bytes) return false;
  o.busy = false;
  o.kept = {};
  if (o.counted) ++o.done;
  return true;
}

void Connection::send_controls() {
  while (!controls_.empty()) {
    const auto [ctx, magic] = controls_.front();
    Context* c = find(ctx);
    if (c == nullptr) {
      controls_.pop_front();
      continue;
    }
    // Callers have just tried to finish every part-written frame.
    size_t i = 0;
    while (i < out_.size() && out_[i].busy) ++i;
    if (i == out_.size()) return;
    const FrameHeader h{magic, 0, 0, 0, 0, magic == kCreditMagic ? c->consumed : 0, ctx};
    size_t sent = write(i, h, nullptr, 0);
    if (sent == 0) return;
    if (magic == kCreditMagic) c->reported = c->consumed;
    controls_.pop_front();
    if (sent < kHeader) part_written(i, h, nullptr, sent, false);
  }
}

void Connection::part_written(size_t i, const FrameHeader& h, const unsigned char* payload, size_t sent,
                              bool counted) {
  OutSock& o = out_[i];
  o.busy = true;
  o.h = h;
  o.payload = payload;
  o.sent = sent;
  o.counted = counted;
}

void Connection::write_pending() {
  for (size_t i = 0; i < out_.size(); ++i)
    if (out_[i].busy) finish(i);
  send_controls();
}

Connection::Put Connection::put(size_t i, const FrameHeader& h, const unsigned char* payload, uint64_t* id) {
  std::lock_guard<std::mutex> lock(mu_);
  write_pending();
  Context* c = find(h.context);
  if (c == nullptr || out_[i].busy) return Put::Later;
  const uint64_t total = kHeader + h.slice_bytes;
  if (c->sent > c->acked && c->sent - c->acked + total > window_) {
    c->starved = true;
    if (!c->asked) {
      c->asked = true;
      controls_.emplace_back(h.context, kAskMagic);
      send_controls();
    }
    return Put::Later;
  }
  c->starved = false;
  size_t sent = write(i, h, payload, 0);
  if (sent == 0) return Put::Later;
  c->sent += total;
  if (sent == total) return Put::Written;
  part_written(i, h, payload, sent, true);
  *id = ++out_[i].started;
  return Put::Started;
}

bool Connection::written(size_t i, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  write_pending();
  return out_[i].done >= id;
}

void Connection::keep(size_t i, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  OutSock& o = out_[i];
  if (!o.busy || !o.counted || o.started != id || o.payload == o.kept.data()) return;
  o.kept.assign(o.payload, o.payload + o.h.slice_bytes);
  o.payload = o.kept.data();
}

// ---- receiving -------------------------------------------------------------

bool Connection::recv(size_t i, void* buf, size_t n, size_t* got) {
  *got = 0;
  for (;;) {
    ssize_t rc = ::recv(socks_[i].get(), buf, n, MSG_DONTWAIT);
    if (rc > 0) {
      *got = static_cast<size_t>(rc);
      return true;
    }
    if (rc == 0) {
      InSock& s = in_[i];
      if (!s.in_frame && s.hdr_got == 0) s.eof = true;
      else lost(on_socket("closed the connection in the middle of a message", i));
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
    int err = errno;
    if (connection_lost(err)) lost(on_socket("is unreachable", i, std::strerror(err)));
    else failed(weftSystemError, on_socket("could not be read from", i, std::strerror(err)));
    return false;
  }
}

void Connection::advance(size_t i, uint64_t caller, bool own_too) {
  InSock& s = in_[i];
  while (error_.code == weftSuccess && lost_.code == weftSuccess) {
    if (!s.in_frame) {
      if (s.eof) return;
      size_t got = 0;
      if (!recv(i, reinterpret_cast<unsigned char*>(&s.h) + s.hdr_got, kHeader - s.hdr_got, &got)) return;
      s.hdr_got += got;
      if (s.hdr_got < kHeader) continue;
      s.hdr_got = 0;
      std::string why = check_frame(s.h, max_slice_);
      if (!why.empty()) return failed(weftRemoteError, on_socket("sent a malformed frame", i, why));
      if (s.h.magic != kFrameMagic) {  // a control frame
        if (Context* c = find(s.h.context); c != nullptr && s.h.magic == kCreditMagic) {
          c->acked = std::max(c->acked, s.h.offset);
          c->asked = false;
        } else if (c != nullptr) {
          c->wanted = true;
          answer(*c, s.h.context);
        }
        continue;
      }
      s.in_frame = true;
      s.mode = Mode::Open;
      s.hdr_left = kHeader;
      s.body_left = s.h.slice_bytes;
    }
    Context* c = find(s.h.context);
    if (c == nullptr) s.mode = Mode::Drop;
    if (s.mode == Mode::Open) {
      if (s.h.context == caller && !own_too) return;
      Aside a;
      a.bytes.resize(s.hdr_left + s.body_left);
      std::memcpy(a.bytes.data(), reinterpret_cast<unsigned char*>(&s.h) + kHeader - s.hdr_left, s.hdr_left);
      a.filled = s.hdr_left;
      s.hdr_left = 0;
      c->aside_bytes += a.bytes.size();
      c->aside[i].push_back(std::move(a));
      s.mode = Mode::Aside;
    }
    while (s.body_left > 0) {
      size_t got = 0;
      if (s.mode == Mode::Aside) {
        Aside& a = c->aside[i].back();
        if (!recv(i, a.bytes.data() + a.filled, s.body_left, &got)) return;
        a.filled += got;
      } else {
        scratch_.resize(65536);
        if (!recv(i, scratch_.data(), std::min(s.body_left, scratch_.size()), &got)) return;
      }
      s.body_left -= got;
    }
    s.in_frame = false;
  }
}

void Connection::answer(Context& c, uint64_t ctx) {
  if (!c.wanted || c.consumed == c.reported) return;
  c.wanted = false;
  controls_.emplace_back(ctx, kCreditMagic);
}

void Connection::read(uint64_t ctx, size_t i, void* buf, size_t n, size_t* got, bool* eof) {
  *got = 0;
  *eof = false;
  std::lock_guard<std::mutex> lock(mu_);
  write_pending();
  Context* c = find(ctx);
  if (c == nullptr || n == 0) return;
  auto* out = static_cast<unsigned char*>(buf);
  std::deque<Aside>& q = c->aside[i];
  // Only the last entry can be unfinished: it is the frame at the socket's head.
  if (!q.empty() && q.front().taken == q.front().filled) advance(i, ctx, false);
  if (!q.empty()) {
    Aside& a = q.front();
    size_t k = std::min(n, a.filled - a.taken);
    std::memcpy(out, a.bytes.data() + a.taken, k);
    a.taken += k;
    if (a.taken == a.bytes.size()) {
      c->aside_bytes -= a.bytes.size();
      q.pop_front();
    }
    *got = k;
  } else {
    advance(i, ctx, false);
    InSock& s = in_[i];
    if (!s.in_frame || s.mode != Mode::Open || s.h.context != ctx) {
      *eof = !s.in_frame && s.eof;
      send_controls();
      return;
    }
    // The caller's own frame at the head: handed over in place.
    size_t k = 0;
    if (s.hdr_left > 0) {
      k = std::min(n, s.hdr_left);
      std::memcpy(out, reinterpret_cast<unsigned char*>(&s.h) + kHeader - s.hdr_left, k);
      s.hdr_left -= k;
    }
    if (k < n && s.hdr_left == 0 && s.body_left > 0) {
      size_t g = 0;
      if (recv(i, out + k, std::min(n - k, s.body_left), &g)) {
        k += g;
        s.body_left -= g;
      }
    }
    if (s.hdr_left == 0 && s.body_left == 0) s.in_frame = false;
    *got = k;
  }
  c->consumed += *got;
  answer(*c, ctx);
  send_controls();
}

bool Connection::anyone_starved() const {
  for (const auto& [ctx, c] : contexts_)
    if (c.starved) return true;
  return false;
}

void Connection::pump(uint64_t ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  write_pending();
  // Alone and not waiting for credit, a context reads its own frames itself.
  const bool starved = anyone_starved();
  if (contexts_.size() < 2 && !starved) return;
  for (size_t i = 0; i < in_.size(); ++i) advance(i, ctx, starved);
  send_controls();
}

bool Connection::has_unread(const Context& c) const {
  for (const std::deque<Aside>& q : c.aside)
    if (!q.empty() && q.front().filled > q.front().taken) return true;
  return false;
}

size_t Connection::aside_bytes(uint64_t ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  Context* c = find(ctx);
  return c == nullptr ? 0 : c->aside_bytes;
}

void Connection::wait(uint64_t ctx, int64_t us, bool writing) {
  pollfd fds[64];
  nfds_t n = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Context* c = find(ctx);
    if (c != nullptr && has_unread(*c)) return;
    for (size_t i = 0; i < socks_.size() && n < 64; ++i) {
      short ev = in_[i].eof ? 0 : POLLIN;
      if (writing || out_[i].busy || !controls_.empty()) ev |= POLLOUT;
      if (ev != 0) fds[n++] = {socks_[i].get(), ev, 0};
    }
  }
  timespec ts{0, static_cast<long>(us) * 1000};
  (void)::ppoll(fds, n, &ts, nullptr);
}

// ---- errors ----------------------------------------------------------------

void Connection::lost(std::string what) {
  if (lost_.code != weftSuccess) return;
  lost_ = {weftRemoteError, std::move(what)};
  lost_at_ = Clock::now();
  troubled_.store(true, std::memory_order_release);
}

void Connection::failed(weftResult_t code, std::string what) {
  if (error_.code == weftSuccess) error_ = {code, std::move(what)};
  troubled_.store(true, std::memory_order_release);
}

void Connection::closed() {
  std::lock_guard<std::mutex> lock(mu_);
  lost("closed the connection");
}

Connection::Fault Connection::fault() {
  if (!troubled_.load(std::memory_order_acquire)) return {};  // every poll asks: no lock then
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.code != weftSuccess) return error_;
  if (lost_.code != weftSuccess && Clock::now() - lost_at_ >= std::chrono::milliseconds(kLostGraceMs)) return lost_;
  return {};
}

void Connection::check(uint64_t ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.code != weftSuccess || lost_.code != weftSuccess) return;
  size_t hung_up = 0;
  for (size_t i = 0; i < socks_.size(); ++i) {
    pollfd p{socks_[i].get(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) continue;
    if (p.revents & POLLERR) {
      int err = 0;
      socklen_t len = sizeof err;
      (void)getsockopt(socks_[i].get(), SOL_SOCKET, SO_ERROR, &err, &len);
      return lost(on_socket("is unreachable", i, std::strerror(err != 0 ? err : EPIPE)));
    }
    // Closed with nothing left to read: data queued before the close is
    // still read (and judged) by the receive.
    int unread = 0;
    if ((p.revents & (POLLRDHUP | POLLHUP)) && ioctl(socks_[i].get(), FIONREAD, &unread) == 0 && unread == 0)
      ++hung_up;
  }
  Context* c = find(ctx);
  if (hung_up == socks_.size() && (c == nullptr || !has_unread(*c))) lost("closed the connection");
}

}  // namespace weft::tcp
