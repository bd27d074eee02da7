// The transport interface: a Link moves bytes to and from one peer. Links know
// nothing of collectives or datatypes. Messages between two ranks are matched
// in order; a tag travels with every message so that mismatched calls are
// detected instead of silently mixing data.
//
// Nothing here blocks: the executor owns waiting (spin, then yield, with a
// deadline and liveness checks between polls).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace weft::transport {

// Receives the bytes of one message piece by piece, in order. `offset` counts
// from the start of the message. A consumer that reduces instead of copying
// reads each byte once, straight from wherever the transport has it.
//
// consume() may finish reading a piece later (an asynchronous copy or kernel,
// completed by an event, as a device data engine's): it then returns false, and
// the link leaves that memory as it is (a FIFO slot stays taken, a sender's
// buffer stays unreleased, a bounce buffer unfilled) and advances this receive
// no further until released() is true. The message is complete only after that.
class Consumer {
 public:
  // true: done with `piece` now.
  virtual bool consume(const void* piece, size_t offset, size_t bytes) = 0;
  // Whether every piece consume() kept has been read.
  virtual bool released() { return true; }

 protected:
  ~Consumer() = default;
};

// One message being received. Filled by the executor, advanced by the link.
struct RecvOp {
  uint64_t tag = 0;
  size_t bytes = 0;
  void* dst = nullptr;           // plain receive: bytes land here ...
  Consumer* consumer = nullptr;  // ... or are handed to this consumer
  // Link-private progress state.
  size_t done = 0;
  bool started = false;
};

// The head of a peer's messages as peek() sees it.
struct NextMessage {
  bool arrived = false;  // its first piece is here; then:
  uint64_t tag = 0;
  size_t bytes = 0;  // the whole message's size
};

class Link {
 public:
  virtual ~Link() = default;

  int peer() const { return peer_; }
  // "shm", "shm+cma", ...: shown in logs and errors.
  virtual const char* name() const = 0;

  // Queues a message. The buffer must stay valid and unchanged until
  // send_done(ticket). Never blocks.
  virtual uint64_t send(const void* data, size_t bytes, uint64_t tag) = 0;
  // True once the peer no longer needs the buffer of `ticket`.
  virtual bool send_done(uint64_t ticket) = 0;
  // Moves queued sends forward without blocking.
  virtual void progress() = 0;

  // Advances `op` as far as the peer's data allows. Ok with *complete set, or an
  // error (mismatched size or tag: weftInvalidUsage) naming the peer.
  virtual Status poll_recv(RecvOp& op, bool* complete) = 0;

  // The next message from the peer, without receiving any of it: a receive from
  // any source looks at every peer's before it takes one. Called only between
  // messages, never while a receive from this peer is under way. An error if
  // the link has failed.
  virtual Status peek(NextMessage* next) = 0;

  // Slow check, called every few hundred polls while waiting on this peer: an
  // error if the peer is gone.
  virtual Status check_peer() = 0;

  // The call whose sends are queued here failed: its buffers may be freed once
  // this returns, so the link reads none of them afterwards (what it must still
  // write, it copies first).
  virtual void abandon_sends() {}

 protected:
  explicit Link(int peer) : peer_(peer) {}

 private:
  int peer_;
};

}  // namespace weft::transport
