// Builds pairs of TCP links on loopback inside one process and drives them
// from one thread: every link is non-blocking, so a loop that moves the
// sender and polls the receiver stands in for two ranks.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/deferred_consumer.h"
#include "transports/tcp/tcp_transport.h"

namespace weft::tcp::test {

inline const uint8_t kSecret[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
inline constexpr uint64_t kCommHash = 0x1234abcd5678ef00ull;

inline boot::SockAddr loopback(const char* host) {
  boot::SockAddr a;
  EXPECT_TRUE(boot::parse_numeric(host, 0, &a));
  return a;
}

// Two ranks' links to each other: a[0] is rank 0's link to rank 1, a[1] the reverse.
struct Pair {
  std::unique_ptr<TcpTransport> t0, t1;
  std::vector<std::unique_ptr<transport::Link>> l0, l1;
  TcpLink* r0() { return static_cast<TcpLink*>(l0.at(0).get()); }
  TcpLink* r1() { return static_cast<TcpLink*>(l1.at(0).get()); }
};

// `before_connect` runs while rank 1 is already waiting for connections
// (to inject strangers).
template <typename F>
Status make_pair(Pair* p, Options opts, const char* host, F before_connect) {
  WEFT_TRY(TcpTransport::listen_at(loopback(host), 0, 2, opts, &p->t0));
  WEFT_TRY(TcpTransport::listen_at(loopback(host), 1, 2, opts, &p->t1));
  Status s1;
  std::thread accept_side([&] {
    s1 = p->t1->connect(kSecret, kCommHash, {{0, p->t0->info()}}, Deadline::after_ms(10000), &p->l1);
  });
  before_connect(p->t1->address());
  Status s0 = p->t0->connect(kSecret, kCommHash, {{1, p->t1->info()}}, Deadline::after_ms(10000), &p->l0);
  accept_side.join();
  WEFT_TRY(s0);
  return s1;
}
inline Status make_pair(Pair* p, Options opts, const char* host = "127.0.0.1") {
  return make_pair(p, opts, host, [](const boot::SockAddr&) {});
}

// Receives on `to` while moving `from`'s sends; fails after 20 s.
inline Status recv_driven(transport::Link* from, transport::Link* to, transport::RecvOp& op) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    bool complete = false;
    WEFT_TRY(to->poll_recv(op, &complete));
    if (complete) return Status::Ok();
    from->progress();
    if (std::chrono::steady_clock::now() > until) return Error(weftTimeout, "test: receive timed out");
  }
}

inline std::vector<unsigned char> pattern(size_t n, unsigned seed) { return weft::testing::noise(n, seed); }

}  // namespace weft::tcp::test
