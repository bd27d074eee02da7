#include "transports/tcp/tcp_transport.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "base/log.h"
#include "base/params.h"
#include "bootstrap/interfaces.h"

namespace weft::tcp {

PeerInfoTcp to_peer_info(const boot::SockAddr& a) {
  PeerInfoTcp p{};
  p.port = a.port();
  if (a.family() == AF_INET) {
    p.family = 4;
    std::memcpy(p.addr, &reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr, 4);
  } else if (a.family() == AF_INET6) {
    p.family = 6;
    std::memcpy(p.addr, &reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr, 16);
  }
  return p;
}

bool from_peer_info(const PeerInfoTcp& p, boot::SockAddr* out) {
  *out = boot::SockAddr{};
  if (p.family == 4) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out->ss);
    v4->sin_family = AF_INET;
    std::memcpy(&v4->sin_addr, p.addr, 4);
    out->len = sizeof(sockaddr_in);
  } else if (p.family == 6) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&out->ss);
    v6->sin6_family = AF_INET6;
    std::memcpy(&v6->sin6_addr, p.addr, 16);
    out->len = sizeof(sockaddr_in6);
  } else {
    return false;
  }
  out->set_port(p.port);
  return true;
}

Options Options::from_params() {
  Options o;
  o.nsocks = static_cast<int>(std::clamp<int64_t>(params::NSOCKS(), 1, 64));
  o.buf_bytes = params::TCP_BUF_BYTES();
  o.dead_ms = params::TCP_DEAD_MS();
  o.link.min_slice = static_cast<size_t>(std::max<int64_t>(params::TCP_MIN_SLICE(), 64));
  o.link.spin_polls = static_cast<uint64_t>(std::max<int64_t>(params::TCP_SPIN_POLLS(), 1));
  o.link.block_us = std::clamp<int64_t>(params::TCP_BLOCK_US(), 0, 999999);
  return o;
}

// Small frames of a collective must leave at once (no Nagle); the buffers are
// set before connect/listen so the window scale is negotiated for them; the
// keepalive and user timeout turn a silent host (cable pulled, link down)
// into a socket error instead of an endless wait.
Status TcpTransport::configure(int fd) const {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
    return SysError(errno, "tcp: TCP_NODELAY");
  if (opts_.buf_bytes > 0) {
    int b = static_cast<int>(std::min<int64_t>(opts_.buf_bytes, 1 << 30));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof b);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
  }
  if (opts_.dead_ms > 0) {
    int secs = static_cast<int>(std::max<int64_t>(opts_.dead_ms / 1000, 1));
    int idle = std::max(secs / 2, 1), intvl = std::max(secs / 10, 1), cnt = 5;
    auto user_timeout = static_cast<unsigned>(opts_.dead_ms);
    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout) < 0)
      return SysError(errno, "tcp: keepalive options");
  }
  return Status::Ok();
}

Status TcpTransport::listen(int rank, int nranks, Options opts, std::unique_ptr<TcpTransport>* out) {
  std::vector<boot::Interface> all;
  WEFT_TRY(boot::list_interfaces(&all));
  boot::Interface itf;
  const std::string& spec = params::SOCKET_IFNAME();
  if (!boot::pick_interface(all, spec, &itf))
    return Error(weftSystemError, "tcp: no network interface matches WEFT_SOCKET_IFNAME='%s'",
                 spec.c_str());
  itf.addr.set_port(0);
  WEFT_TRY(listen_at(itf.addr, rank, nranks, opts, out));
  WEFT_INFO(TRANSPORT, "tcp: listening on %s (interface %s), %d sockets per peer",
            (*out)->addr_.str().c_str(), itf.name.c_str(), opts.nsocks);
  return Status::Ok();
}

Status TcpTransport::listen_at(const boot::SockAddr& addr, int rank, int nranks, Options opts,
                               std::unique_ptr<TcpTransport>* out) {
  std::unique_ptr<TcpTransport> t(new TcpTransport);
  t->rank_ = rank;
  t->nranks_ = nranks;
  t->opts_ = opts;
  Status st = boot::listen_on(addr, &t->listen_fd_);
  if (!st.ok()) return st.prefix("tcp: ");
  // Accepted sockets inherit buffer sizes and keepalive from the listener.
  WEFT_TRY(t->configure(t->listen_fd_.get()));
  WEFT_TRY(boot::local_address(t->listen_fd_.get(), &t->addr_));
  *out = std::move(t);
  return Status::Ok();
}

namespace {

// One connection being set up.
struct Conn {
  enum class St { Retry, Connecting, Writing, Reading, Done, Dropped };
  boot::Fd fd;
  boot::SockAddr addr;  // outbound: where we connect; inbound: where it came from
  bool outbound = false;
  int peer = -1;   // outbound: the target; inbound: known from its hello
  int index = -1;
  St st = St::Retry;
  Hello out{};
  size_t out_sent = 0;
  Hello in{};
  size_t in_got = 0;
  Clock::time_point retry_at{};
};

bool transient(int err) {
  return err == ECONNREFUSED || err == ECONNRESET || err == ETIMEDOUT || err == EHOSTUNREACH ||
         err == ENETUNREACH || err == EAGAIN;
}

}  // namespace

Status TcpTransport::connect(const uint8_t secret[16], uint64_t comm_hash,
                             const std::vector<RemotePeer>& peers, Deadline deadline,
                             std::vector<std::unique_ptr<transport::Link>>* links) {
  const int n = opts_.nsocks;
  std::map<int, std::vector<boot::Fd>> socks;  // peer -> socket per index
  std::map<int, std::string> where;            // peer -> its listening address
  size_t missing = 0;
  std::vector<Conn> conns;
  for (const RemotePeer& p : peers) {
    boot::SockAddr a;
    if (!from_peer_info(p.info, &a))
      return Error(weftSystemError, "tcp: rank %d has no TCP listener (no usable interface there)",
                   p.rank);
    socks[p.rank].resize(static_cast<size_t>(n));
    where[p.rank] = a.str();
    missing += static_cast<size_t>(n);
    if (p.rank < rank_) continue;  // it connects to us
    for (int i = 0; i < n; ++i) {
      Conn c;
      c.outbound = true;
      c.addr = a;
      c.peer = p.rank;
      c.index = i;
      c.out = Hello{kHelloMagic, {}, comm_hash, rank_, p.rank, i, n};
      std::memcpy(c.out.secret, secret, 16);
      conns.push_back(std::move(c));
    }
  }

  auto start_connect = [&](Conn& c) -> Status {
    c.fd = boot::Fd(::socket(c.addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!c.fd.valid()) return SysError(errno, "tcp: socket() for %s", c.addr.str().c_str());
    WEFT_TRY(configure(c.fd.get()));
    int rc = ::connect(c.fd.get(), reinterpret_cast<const sockaddr*>(&c.addr.ss), c.addr.len);
    int err = rc == 0 ? 0 : errno;
    if (err == 0) c.st = Conn::St::Writing;
    else if (err == EINPROGRESS || err == EINTR) c.st = Conn::St::Connecting;
    else if (transient(err)) c.st = Conn::St::Retry, c.fd.reset(),
                             c.retry_at = Clock::now() + std::chrono::milliseconds(100);
    else return SysError(err, "tcp: connecting to rank %d at %s", c.peer, c.addr.str().c_str());
    return Status::Ok();
  };
  auto drop = [&](Conn& c, const std::string& why) {
    WEFT_WARN(TRANSPORT, "tcp: rejected connection from %s: %s", c.addr.str().c_str(), why.c_str());
    c.st = Conn::St::Dropped;
    c.fd.reset();
  };
  auto finish = [&](Conn& c) {
    socks[c.peer][static_cast<size_t>(c.index)] = std::move(c.fd);
    c.st = Conn::St::Done;
    --missing;
  };
  // Handles readiness of one connection; only hard errors of our own
  // connections fail set-up, a stranger's bad connection is just dropped.
  auto step = [&](Conn& c, short revents) -> Status {
    if (c.st == Conn::St::Connecting) {
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(c.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
      if (err == 0) c.st = Conn::St::Writing;
      else if (transient(err)) c.st = Conn::St::Retry, c.fd.reset(),
                               c.retry_at = Clock::now() + std::chrono::milliseconds(100);
      else return SysError(err, "tcp: connecting to rank %d at %s", c.peer, c.addr.str().c_str());
    }
    if (c.st == Conn::St::Writing) {
      ssize_t rc = ::send(c.fd.get(), reinterpret_cast<const char*>(&c.out) + c.out_sent,
                          sizeof(Hello) - c.out_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (rc < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        if (!c.outbound) return drop(c, std::string("writing the reply: ") + std::strerror(errno)), Status::Ok();
        return SysError(errno, "tcp: handshake with rank %d at %s", c.peer, c.addr.str().c_str());
      }
      if (rc > 0) c.out_sent += static_cast<size_t>(rc);
      if (c.out_sent < sizeof(Hello)) return Status::Ok();
      if (!c.outbound) return finish(c), Status::Ok();
      c.st = Conn::St::Reading;
    }
    if (c.st == Conn::St::Reading && (revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t rc = ::recv(c.fd.get(), reinterpret_cast<char*>(&c.in) + c.in_got,
                          sizeof(Hello) - c.in_got, MSG_DONTWAIT);
      if (rc == 0 || (rc < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        const char* why = rc == 0 ? "closed before completing the handshake" : std::strerror(errno);
        if (!c.outbound) return drop(c, why), Status::Ok();
        return Error(weftRemoteError,
                     "tcp: rank %d at %s refused our handshake (%s); does every rank use the "
                     "same job secret and WEFT_NSOCKS?",
                     c.peer, c.addr.str().c_str(), why);
      }
      if (rc > 0) c.in_got += static_cast<size_t>(rc);
      if (c.in_got < sizeof(Hello)) return Status::Ok();
      std::string why = check_hello(c.in, secret, comm_hash, rank_, nranks_, n);
      if (c.outbound) {
        if (why.empty() && (c.in.from_rank != c.peer || c.in.sock_index != c.index))
          why = "answered as rank " + std::to_string(c.in.from_rank) + " socket " +
                std::to_string(c.in.sock_index);
        if (!why.empty())
          return Error(weftRemoteError, "tcp: bad handshake reply from rank %d at %s: %s", c.peer,
                       c.addr.str().c_str(), why.c_str());
        return finish(c), Status::Ok();
      }
      int from = c.in.from_rank;
      if (why.empty() && (from >= rank_ || socks.count(from) == 0))
        why = "rank " + std::to_string(from) + " is not expected to connect to rank " +
              std::to_string(rank_);
      if (why.empty() && socks[from][static_cast<size_t>(c.in.sock_index)].valid())
        why = "duplicate socket " + std::to_string(c.in.sock_index) + " from rank " +
              std::to_string(from);
      if (!why.empty()) return drop(c, why), Status::Ok();
      c.peer = from;
      c.index = c.in.sock_index;
      c.out = c.in;
      std::swap(c.out.from_rank, c.out.to_rank);
      c.st = Conn::St::Writing;
      return Status::Ok();
    }
    return Status::Ok();
  };

  for (Conn& c : conns) WEFT_TRY(start_connect(c));
  std::vector<pollfd> pfds;
  std::vector<size_t> who;
  while (missing > 0) {
    if (deadline.expired()) {
      std::string names;
      for (auto& [r, v] : socks) {
        size_t have = 0;
        for (auto& f : v) have += f.valid() ? 1 : 0;
        if (have < v.size())
          names += (names.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " at " +
                   where[r] + " (" + std::to_string(have) + "/" + std::to_string(v.size()) + ")";
      }
      return Error(weftTimeout, "tcp: timed out connecting to %s", names.c_str());
    }
    pfds.clear();
    who.clear();
    pfds.push_back({listen_fd_.get(), POLLIN, 0});
    who.push_back(SIZE_MAX);
    auto now = Clock::now();
    for (size_t k = 0; k < conns.size(); ++k) {
      Conn& c = conns[k];
      if (c.st == Conn::St::Retry && now >= c.retry_at) WEFT_TRY(start_connect(c));
      short ev = c.st == Conn::St::Reading ? POLLIN
               : (c.st == Conn::St::Connecting || c.st == Conn::St::Writing) ? POLLOUT : 0;
      if (ev == 0) continue;
      pfds.push_back({c.fd.get(), ev, 0});
      who.push_back(k);
    }
    int rc = ::poll(pfds.data(), pfds.size(), static_cast<int>(std::min<int64_t>(deadline.remaining_ms(), 50)));
    if (rc < 0 && errno != EINTR) return SysError(errno, "tcp: poll during set-up");
    if (rc <= 0) continue;
    for (size_t k = 1; k < pfds.size(); ++k)
      if (pfds[k].revents != 0) WEFT_TRY(step(conns[who[k]], pfds[k].revents));
    if (pfds[0].revents & POLLIN) {
      for (;;) {
        Conn c;
        WEFT_TRY(boot::accept_one(listen_fd_.get(), &c.fd, &c.addr));
        if (!c.fd.valid()) break;
        WEFT_TRY(configure(c.fd.get()));
        c.st = Conn::St::Reading;
        conns.push_back(std::move(c));
      }
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(),
                               [](const Conn& c) {
                                 return c.st == Conn::St::Done || c.st == Conn::St::Dropped;
                               }),
                conns.end());
  }

  // Every expected connection is in: later arrivals could only be strangers.
  listen_fd_.reset();
  for (const RemotePeer& p : peers) {
    auto conn = std::make_shared<Connection>(where[p.rank], std::move(socks[p.rank]), largest_slice(opts_.link));
    links->push_back(std::make_unique<TcpLink>(p.rank, std::move(conn), comm_hash, opts_.link));
    WEFT_INFO(TRANSPORT, "rank %d -> rank %d via tcp to %s (%d sockets, %s buffers)", rank_, p.rank,
              where[p.rank].c_str(), n, opts_.buf_bytes > 0 ? "fixed" : "autotuned");
  }
  return Status::Ok();
}

}  // namespace weft::tcp
