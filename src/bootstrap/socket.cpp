#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <cstring>
#include <thread>

namespace weft::boot {

namespace {
// Bootstrap sockets, as a bitmap by fd number, so that a forked child can let go
// of them (see track_socket). Lock-free: the fork handler may not take locks.
constexpr int kMaxTracked = 1 << 16;
std::atomic<uint64_t> g_tracked[kMaxTracked / 64];

// In a child forked from a process with bootstrap connections (a DataLoader
// worker, a helper process): point each such fd at /dev/null. Otherwise the
// child's copies keep the TCP connections open after the parent dies, and
// nobody hears that the rank (or the root) is gone. The fd numbers stay taken,
// so objects that still hold them never close someone else's file.
void release_in_child() {
  int nul = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (nul < 0) return;
  for (int w = 0; w < kMaxTracked / 64; ++w) {
    uint64_t bits = g_tracked[w].load(std::memory_order_relaxed);
    while (bits != 0) {
      int fd = w * 64 + __builtin_ctzll(bits);
      bits &= bits - 1;
      if (fd != nul) ::dup3(nul, fd, O_CLOEXEC);
    }
  }
  ::close(nul);
}
}  // namespace

void track_socket(int fd) {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, release_in_child); });
  if (fd >= 0 && fd < kMaxTracked)
    g_tracked[fd / 64].fetch_or(uint64_t{1} << (fd % 64), std::memory_order_relaxed);
}

void Fd::reset(int fd) {
  if (fd_ >= 0) {
    if (fd_ < kMaxTracked)
      g_tracked[fd_ / 64].fetch_and(~(uint64_t{1} << (fd_ % 64)), std::memory_order_relaxed);
    ::close(fd_);
  }
  fd_ = fd;
}

uint16_t SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

void SockAddr::set_port(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(port);
}

std::string SockAddr::host() const {
  char buf[NI_MAXHOST];
  if (len == 0 ||
      getnameinfo(reinterpret_cast<const sockaddr*>(&ss), len, buf, sizeof buf, nullptr, 0,
                  NI_NUMERICHOST) != 0)
    return "?";
  return buf;
}

std::string SockAddr::str() const {
  std::string h = host();
  if (family() == AF_INET6) h = "[" + h + "]";
  return h + ":" + std::to_string(port());
}

bool parse_numeric(const std::string& host, uint16_t port, SockAddr* out) {
  *out = SockAddr{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out->ss);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    out->len = sizeof(sockaddr_in);
    return true;
  }
  // getaddrinfo with AI_NUMERICHOST also understands "fe80::1%eth0" scope ids.
  addrinfo hints{};
  hints.ai_family = AF_INET6;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return false;
  std::memcpy(&out->ss, res->ai_addr, res->ai_addrlen);
  out->len = res->ai_addrlen;
  freeaddrinfo(res);
  out->set_port(port);
  return true;
}

Status resolve(const std::string& host, uint16_t port, SockAddr* out) {
  if (parse_numeric(host, port, out)) return Status::Ok();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr)
    return Error(weftInvalidUsage, "cannot resolve bootstrap root host '%s': %s", host.c_str(),
                 gai_strerror(rc));
  // Prefer IPv4 when a name has both: the root listens on one numeric address
  // and IPv4 is what most launchers' MASTER_ADDR means.
  const addrinfo* pick = res;
  for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next)
    if (ai->ai_family == AF_INET) {
      pick = ai;
      break;
    }
  *out = SockAddr{};
  std::memcpy(&out->ss, pick->ai_addr, pick->ai_addrlen);
  out->len = pick->ai_addrlen;
  out->set_port(port);
  freeaddrinfo(res);
  return Status::Ok();
}

bool split_host_port(const std::string& text, std::string* host, uint16_t* port) {
  std::string h, p;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return false;
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) return false;
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
    // A bare IPv6 address without brackets is ambiguous; refuse it.
    if (h.find(':') != std::string::npos) return false;
  }
  if (h.empty() || p.empty() || p.size() > 5) return false;
  unsigned long v = 0;
  for (char c : p) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned long>(c - '0');
  }
  if (v > 65535) return false;
  *host = h;
  *port = static_cast<uint16_t>(v);
  return true;
}

namespace {
Status set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return SysError(errno, "bootstrap: fcntl(O_NONBLOCK)");
  return Status::Ok();
}

// Bootstrap messages are small request/reply exchanges: Nagle only adds latency.
// Keepalive probes turn a peer host that vanished without a FIN or RST (power
// loss, a partition) into an error after about a minute instead of never.
void set_nodelay(int fd) {
  int one = 1, idle = 30, intvl = 10, cnt = 3;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}
}  // namespace

Status listen_on(const SockAddr& addr, Fd* out) {
  Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SysError(errno, "bootstrap: socket() for %s", addr.str().c_str());
  track_socket(fd.get());
  int one = 1;
  if (setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
    return SysError(errno, "bootstrap: SO_REUSEADDR on %s", addr.str().c_str());
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) < 0)
    return SysError(errno, "bootstrap: bind to %s", addr.str().c_str());
  if (::listen(fd.get(), SOMAXCONN) < 0)
    return SysError(errno, "bootstrap: listen on %s", addr.str().c_str());
  WEFT_TRY(set_nonblocking(fd.get()));
  *out = std::move(fd);
  return Status::Ok();
}

Status local_address(int fd, SockAddr* out) {
  *out = SockAddr{};
  out->len = sizeof out->ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&out->ss), &out->len) < 0)
    return SysError(errno, "bootstrap: getsockname");
  return Status::Ok();
}

Status accept_one(int listen_fd, Fd* out, SockAddr* peer) {
  *peer = SockAddr{};
  peer->len = sizeof peer->ss;
  for (;;) {
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer->ss), &peer->len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      track_socket(fd);
      set_nodelay(fd);
      out->reset(fd);
      return Status::Ok();
    }
    if (errno == EINTR) continue;
    out->reset();
    // A connection that was reset before we accepted it is not our error.
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) return Status::Ok();
    return SysError(errno, "bootstrap root: accept");
  }
}

namespace {
// Waits for fd to become writable (connect completion or send space).
bool wait_events(int fd, short events, Deadline deadline, int* err) {
  *err = 0;
  for (;;) {
    pollfd p{fd, events, 0};
    int64_t left = deadline.remaining_ms();
    int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) {
      *err = errno;
      return false;
    }
    if (rc == 0 && deadline.expired()) return false;
  }
}
}  // namespace

bool wait_readable(int fd, Deadline deadline, int* err) {
  return wait_events(fd, POLLIN, deadline, err);
}

Status connect_retry(const SockAddr& addr, int64_t retry_ms, Deadline deadline, Fd* out) {
  int last_err = 0;
  for (int attempt = 0;; ++attempt) {
    Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return SysError(errno, "bootstrap: socket() for %s", addr.str().c_str());
    track_socket(fd.get());
    int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS || err == EINTR) {
      int perr = 0;
      if (!wait_events(fd.get(), POLLOUT, deadline, &perr)) {
        if (perr != 0) return SysError(perr, "bootstrap: poll while connecting to %s", addr.str().c_str());
        return Error(weftTimeout, "bootstrap connect: timed out connecting to the root at %s",
                     addr.str().c_str());
      }
      socklen_t len = sizeof err;
      if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
    }
    if (err == 0) {
      set_nodelay(fd.get());
      *out = std::move(fd);
      return Status::Ok();
    }
    last_err = err;
    bool transient = err == ECONNREFUSED || err == ECONNRESET || err == ETIMEDOUT ||
                     err == EHOSTUNREACH || err == ENETUNREACH || err == EAGAIN;
    if (!transient) return SysError(err, "bootstrap: connect to the root at %s", addr.str().c_str());
    if (deadline.remaining_ms() <= 0) break;
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min<int64_t>(retry_ms, deadline.remaining_ms())));
    if (deadline.expired()) break;
  }
  return Error(weftTimeout,
               "bootstrap connect: timed out connecting to the root at %s (last attempt: %s)",
               addr.str().c_str(), std::strerror(last_err));
}

Status send_all(int fd, const void* data, size_t size, Deadline deadline, const char* what) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int err = 0;
      if (!wait_events(fd, POLLOUT, deadline, &err)) {
        if (err != 0) return SysError(err, "bootstrap %s: poll", what);
        return Error(weftTimeout, "bootstrap %s: timed out sending to the root", what);
      }
      continue;
    }
    int err = n < 0 ? errno : EPIPE;
    if (err == EPIPE || err == ECONNRESET)
      return Error(weftRemoteError, "bootstrap %s: lost connection to the bootstrap root", what);
    return SysError(err, "bootstrap %s: send", what);
  }
  return Status::Ok();
}

ssize_t recv_some(int fd, void* buf, size_t size, int* err) {
  *err = 0;
  for (;;) {
    ssize_t n = ::recv(fd, buf, size, MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) *err = errno;
    return -1;
  }
}

}  // namespace weft::boot
