// In-memory links between ranks that are threads of one process, for testing the
// executor without transports. One queue per direction; messages match in order.
//
// - Eager: send() copies the bytes and send_done() is true at once.
// - Rendezvous: send() records the sender's pointer; the receiver reads the
//   sender's buffer in place, piece by piece, when it consumes the message (as
//   shm does with cross-memory attach), and send_done() turns true only once the
//   whole message is consumed. A sender that writes its buffer before then
//   changes what the peer receives: this is what the executor's rules prevent.
// - Pieces: each poll_recv() delivers at most `piece` bytes (0: the whole
//   message), so a receive completes over several polls, and the last piece of a
//   message may be shorter. Keep `piece` a multiple of the element size, as the
//   real links do (a reducing consumer takes whole elements).
// - A tag or size that differs from what the receiver expects is weftInvalidUsage
//   naming the sending rank, as the real links report it.
// - kill(r): every link to r fails check_peer() (weftRemoteError naming r).
// - Gates and hooks let a test order events across ranks deterministically: a
//   gate holds back the next piece of a direction until it returns true; a hook
//   runs in the receiving thread after each piece (it may read that rank's buffers).
//   Both run under the net's lock and may call the net's queries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "transports/link.h"

namespace weft::testing {

struct FakeOptions {
  bool rendezvous = false;
  size_t piece = 0;  // bytes per poll_recv(); 0: whole messages
};

class FakeNet {
 public:
  FakeNet(int nranks, FakeOptions opt);
  ~FakeNet();
  FakeNet(const FakeNet&) = delete;
  FakeNet& operator=(const FakeNet&) = delete;

  int nranks() const { return n_; }
  // rank's links, indexed by peer (nullptr for itself), for exec::Executor.
  std::vector<transport::Link*> links_of(int rank);

  void kill(int rank);
  // Holds back pieces from -> to while gate() is false.
  void set_gate(int from, int to, std::function<bool()> gate);
  // Called after each piece from -> to is consumed: (message index, offset, bytes).
  void set_hook(int from, int to, std::function<void(uint64_t, size_t, size_t)> hook);

  // Queries (any thread, or inside a gate or hook).
  // Messages from -> to consumed whole so far.
  uint64_t consumed(int from, int to) const;
  // Bytes from -> to consumed so far, counting partial messages.
  size_t consumed_bytes(int from, int to) const;
  // Messages from -> to sent so far.
  uint64_t sent(int from, int to) const;

 private:
  friend class FakeLink;
  struct Msg {
    uint64_t tag;
    size_t bytes;
    const unsigned char* src;         // rendezvous: the sender's buffer
    std::vector<unsigned char> copy;  // eager: the bytes at send()
    size_t delivered = 0;
  };
  struct Wire {
    std::deque<Msg> queue;
    uint64_t sent = 0, consumed = 0;
    size_t consumed_bytes = 0;
    std::function<bool()> gate;
    std::function<void(uint64_t, size_t, size_t)> hook;
  };
  Wire& wire(int from, int to) { return wires_[static_cast<size_t>(from * n_ + to)]; }
  const Wire& wire(int from, int to) const { return wires_[static_cast<size_t>(from * n_ + to)]; }

  const int n_;
  const FakeOptions opt_;
  mutable std::recursive_mutex mu_;
  std::vector<Wire> wires_;
  std::vector<bool> dead_;
  std::vector<std::unique_ptr<transport::Link>> links_;  // [rank * n + peer]
};

}  // namespace weft::testing
