// Sets up TCP links between ranks on different hosts.
//
// Each rank listens on one port of the interface chosen by WEFT_SOCKET_IFNAME
// (the bootstrap's rules) and publishes its address in the communicator's
// all-gather (PeerInfoTcp). For every pair, the lower rank opens nsocks
// connections to the higher one; each opens with a Hello carrying the job
// secret, the communicator hash, both ranks and the socket index, answered by
// the same from the other end. A connection whose hello is wrong is closed
// and logged (WARN, with its address) and set-up keeps waiting for the right
// ones until the deadline. The listener closes once every pair is connected.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/wait.h"
#include "bootstrap/socket.h"
#include "transports/link.h"
#include "transports/tcp/tcp_link.h"

namespace weft::tcp {

// A rank's listening address as carried in the all-gather; family 0: this
// rank has no TCP listener (no usable interface).
struct PeerInfoTcp {
  uint8_t family;  // 4 or 6
  uint8_t pad;
  uint16_t port;   // host order
  uint8_t addr[16];
};
static_assert(sizeof(PeerInfoTcp) == 20);

PeerInfoTcp to_peer_info(const boot::SockAddr& a);
bool from_peer_info(const PeerInfoTcp& p, boot::SockAddr* out);

struct Options {
  int nsocks = 1;  // WEFT_NSOCKS; 1 measured best over veth, more help where a NIC spreads flows
  int64_t buf_bytes = 0;     // SO_SNDBUF/SO_RCVBUF; 0 leaves the kernel's autotuning
  int64_t dead_ms = 10000;   // keepalive + TCP_USER_TIMEOUT: a silent host fails after this; 0: off
  LinkOptions link;
  static Options from_params();
};

struct RemotePeer {
  int rank;
  PeerInfoTcp info;
};

class TcpTransport {
 public:
  // Listens on the interface chosen by WEFT_SOCKET_IFNAME (logged at INFO).
  static Status listen(int rank, int nranks, Options opts, std::unique_ptr<TcpTransport>* out);
  // Listens on a given address (port 0: ephemeral); for tests.
  static Status listen_at(const boot::SockAddr& addr, int rank, int nranks, Options opts,
                          std::unique_ptr<TcpTransport>* out);

  PeerInfoTcp info() const { return to_peer_info(addr_); }
  const boot::SockAddr& address() const { return addr_; }

  // Connects to every rank in `peers` (each pair must list each other) and
  // appends one TcpLink per peer, in the order of `peers`.
  Status connect(const uint8_t secret[16], uint64_t comm_hash, const std::vector<RemotePeer>& peers,
                 Deadline deadline, std::vector<std::unique_ptr<transport::Link>>* links);

 private:
  TcpTransport() = default;
  Status configure(int fd) const;

  int rank_ = -1;
  int nranks_ = 0;
  Options opts_;
  boot::SockAddr addr_;
  boot::Fd listen_fd_;
};

}  // namespace weft::tcp
