// A Link to a peer on another host over several TCP connections, as one
// context of a Connection that communicators split from one share.
//
// Each message is cut into slices (one per socket for mid-size messages, at
// least min_slice bytes, 64-byte aligned) and the slices are dealt round-robin
// over the sockets; every slice travels as a FrameHeader plus payload. Each
// socket is an ordered stream, so the receiver reassembles by offset: a plain
// receive reads every slice straight into its place in the destination, a
// consumer (reduction) gets the bytes strictly in offset order through one
// bounce buffer per socket, and the lowest undelivered slice is always at the
// head of its socket, so in-order delivery never waits on itself.
//
// Sockets are non-blocking and driven by the caller: progress() writes queued
// frames, poll_recv() reads. Nothing waits, except that poll_recv, after many
// empty polls in a row, sleeps in ppoll() on the sockets for at most
// LinkOptions::block_us (see idle_wait). Errors are sticky and name the
// peer's rank and address.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transports/link.h"
#include "transports/tcp/connection.h"
#include "transports/tcp/wire.h"

namespace weft::tcp {

struct LinkOptions {
  size_t min_slice = 65536;     // messages below 2 x this go on one socket
  size_t max_slice = 4 << 20;   // largest slice sent; larger ones received are malformed
  uint64_t spin_polls = 200;    // empty poll_recv calls before waiting in ppoll ...
  int64_t block_us = 100;       // ... for at most this long (0: never wait)
};

// The largest slice a link sends (and a connection accepts) with these options.
size_t largest_slice(const LinkOptions& o);

class TcpLink final : public transport::Link {
 public:
  // Context `ctx` (the communicator's hash) of `conn`; opened here, closed by the destructor.
  TcpLink(int peer, std::shared_ptr<Connection> conn, uint64_t ctx, LinkOptions opts);
  ~TcpLink() override;

  const char* name() const override { return "tcp"; }
  uint64_t send(const void* data, size_t bytes, uint64_t tag) override;
  bool send_done(uint64_t ticket) override;
  void progress() override;
  Status poll_recv(transport::RecvOp& op, bool* complete) override;
  Status peek(transport::NextMessage* next) override;
  Status check_peer() override;
  void abandon_sends() override;

  size_t nsocks() const { return conn_->nsocks(); }
  const std::string& peer_addr() const { return conn_->peer_addr(); }
  const std::shared_ptr<Connection>& connection() const { return conn_; }

 private:
  struct OutFrame {
    FrameHeader h;
    const unsigned char* payload;
    uint64_t ticket;
    size_t sock;
  };
  // A frame the connection took in part: it writes the rest.
  struct Tail {
    size_t sock;
    uint64_t id;
    uint64_t ticket;
  };
  struct Pending {
    uint64_t ticket;
    size_t frames_left;
  };
  enum class In { Header, Ready, Body, Held };
  struct InSock {
    In state = In::Header;
    FrameHeader h{};
    size_t hdr_got = 0;
    size_t body_got = 0;   // payload bytes read of the current frame
    size_t delivered = 0;  // consumer: payload bytes handed on, in order
    bool eof = false;      // orderly close seen at a frame boundary
    std::vector<unsigned char> bounce;
  };

  void write_frames();
  void frame_sent(uint64_t ticket);
  Status pump(size_t i, transport::RecvOp& op);
  // Reads socket i's next frame header if it has none yet.
  Status read_header(size_t i);
  Status read_some(size_t i, void* buf, size_t n, size_t* got);
  // The connection's error, naming the peer.
  Status conn_error();
  bool deliver_in_order(transport::RecvOp& op);
  // The consumer kept a piece of a bounce buffer: nothing is read into the
  // bounce buffers until it is done with it.
  bool held_ = false;
  Status fail(Status st);
  void idle_wait(uint64_t in_before);

  std::shared_ptr<Connection> conn_;
  uint64_t ctx_;
  LinkOptions opts_;
  Status error_;  // sticky: the first protocol error of this context

  // Sending. Frames are handed to the connection in the order they were sent
  // (across sockets too), so credit goes to the earliest frames: a receiver
  // that hands a message on in offset order always gets the next piece.
  std::deque<OutFrame> out_;
  std::vector<Tail> tails_;
  std::deque<Pending> pending_;
  uint64_t next_ticket_ = 0;
  uint64_t send_seq_ = 0;
  size_t next_sock_ = 0;

  // Receiving.
  std::vector<InSock> in_;
  uint64_t recv_seq_ = 0;
  uint64_t bytes_in_ = 0;    // payload and header bytes read, ever
  uint64_t idle_polls_ = 0;  // poll_recv calls in a row that read nothing
};

}  // namespace weft::tcp
