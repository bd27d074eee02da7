// TCP helpers of the bootstrap: an owning fd, numeric addresses, listen/connect,
// and send/receive loops that survive EINTR and partial transfers and never wait
// past a Deadline. Sockets here are non-blocking; every wait is a poll().
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/wait.h"

namespace weft::boot {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Marks fd as a bootstrap socket: in a child forked from this process it is
// replaced by /dev/null, so only this process keeps the connection alive. Fd
// forgets the mark when it closes the fd.
void track_socket(int fd);

// A socket address with its length; family AF_INET or AF_INET6.
struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;

  int family() const { return ss.ss_family; }
  uint16_t port() const;
  void set_port(uint16_t port);
  // Numeric host without port ("10.0.0.1", "::1").
  std::string host() const;
  // "10.0.0.1:29500" or "[::1]:29500": the form used in logs and WEFT_COMM_ID.
  std::string str() const;
};

// Parses a numeric IPv4/IPv6 host (no brackets) and a port.
bool parse_numeric(const std::string& host, uint16_t port, SockAddr* out);
// Resolves a host name or numeric address with getaddrinfo (first TCP result).
Status resolve(const std::string& host, uint16_t port, SockAddr* out);
// Splits "host:port" or "[v6addr]:port" into its parts; false if malformed.
bool split_host_port(const std::string& text, std::string* host, uint16_t* port);

// Non-blocking listening socket on addr (port 0: ephemeral); SO_REUSEADDR so a
// fixed rendezvous port can be reused right after a previous job.
Status listen_on(const SockAddr& addr, Fd* out);
// The address a bound socket actually has (to learn the ephemeral port).
Status local_address(int fd, SockAddr* out);
// Accepts one pending connection, non-blocking; *out invalid if none is pending.
Status accept_one(int listen_fd, Fd* out, SockAddr* peer);

// Connects to addr, retrying refused/unreachable attempts every retry_ms until
// the deadline: the root may not be listening yet. Returns a non-blocking socket.
Status connect_retry(const SockAddr& addr, int64_t retry_ms, Deadline deadline, Fd* out);

// Writes all of [data, data+size), waiting on POLLOUT as needed. `what` names the
// operation for the error message.
Status send_all(int fd, const void* data, size_t size, Deadline deadline, const char* what);

// One non-blocking recv into buf: returns bytes read (> 0), 0 on orderly EOF,
// -1 with *err = 0 when nothing is available, -1 with *err = errno on failure.
ssize_t recv_some(int fd, void* buf, size_t size, int* err);

// Waits until fd is readable or the deadline passes; false on timeout.
// *err gets errno on poll failure (0 otherwise).
bool wait_readable(int fd, Deadline deadline, int* err);

}  // namespace weft::boot
