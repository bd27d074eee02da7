// The TCP transport's receive path over a socket pair whose other end carries
// the input: the hello check, then frames (header, slices, reassembly by offset
// across one or two sockets; credits; other contexts' frames moved aside or
// dropped) into a receive of a size and tag the input picks, straight into a
// buffer or through a consumer. Malformed streams must end in an
// error, never in an out-of-bounds write or a wait without end.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "transports/tcp/tcp_link.h"
#include "transports/tcp/wire.h"

#include "sink.h"

using namespace weft;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sizeof(tcp::Hello) + 8) return 0;
  // The hello a listener checks before it hands the socket to a link.
  tcp::Hello h;
  std::memcpy(&h, data, sizeof h);
  const uint8_t secret[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  (void)tcp::check_hello(h, secret, 42, 1, 4, 2);
  data += sizeof h;
  size -= sizeof h;
  const size_t nsocks = 1 + (data[0] & 1);
  const bool consumer = data[0] & 2;
  const size_t bytes = (static_cast<size_t>(data[1]) << 8 | data[2]) % 65536;
  const uint64_t tag = data[3];
  const size_t max_slice = 64 + (static_cast<size_t>(data[4]) << 6);
  data += 8;
  size -= 8;
  std::vector<boot::Fd> mine;
  std::vector<int> theirs;
  for (size_t i = 0; i < nsocks; ++i) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return 0;
    mine.emplace_back(sv[0]);
    theirs.push_back(sv[1]);
  }
  // The stream goes to the sockets in turns of 97 bytes (the pair buffers it all).
  for (size_t off = 0, k = 0; off < size; off += 97, ++k) {
    size_t n = size - off < 97 ? size - off : 97;
    if (::send(theirs[k % nsocks], data + off, n, MSG_NOSIGNAL) != static_cast<ssize_t>(n)) break;
  }
  for (int fd : theirs) ::close(fd);  // the peer hangs up after its bytes
  tcp::LinkOptions opts;
  opts.min_slice = 64;
  opts.max_slice = max_slice;
  opts.spin_polls = ~uint64_t{0};  // never wait in ppoll: everything is there already
  opts.block_us = 0;
  // Context 0 receives; frames of context 1 (open beside it) are moved aside,
  // those of any other are dropped.
  auto conn = std::make_shared<tcp::Connection>("fuzz", std::move(mine), tcp::largest_slice(opts));
  tcp::TcpLink link(1, conn, 0, opts);
  tcp::TcpLink beside(1, conn, 1, opts);
  fuzz::Receive rx(bytes, tag, consumer);
  bool complete = false;
  for (int i = 0; i < 256 && !complete; ++i)
    if (!link.poll_recv(rx.op, &complete).ok()) break;
  return 0;
}
