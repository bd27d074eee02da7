// The TCP connections between two ranks, shared by every communicator of a
// family (those split from one) that links the two: each communicator is a
// context, and every frame names its context.
//
// Receiving. A context reads its own frames in place (TcpLink reads a frame's
// body straight into the destination). A frame of another context met on the
// way is moved aside (copied into memory of that context, in stream order per
// socket), so no communicator waits behind another's traffic; a context reads
// its moved-aside bytes before the socket's.
//
// Flow control. A sender keeps at most kWindowSlices frames' worth of one
// context unconsumed by the other end; when it has no room it asks, and the
// other end answers with what it consumed (a credit frame) once it has consumed
// anything new, one answer per ask. That bounds what is moved aside for a
// context that is not receiving, never stops another context's frames, and
// sends nothing back unasked. When a context waits for credit, every call
// moves all frames aside (its own too) so that the answer behind them is read.
//
// Sending. A frame another context may not interleave with is written whole:
// one that the socket took only in part is finished by whichever context calls
// next, from the sender's buffer; a sender that gives its buffer up (its call
// failed) has the rest copied first (keep()).
//
// Thread-safe: the communicators of a family run on different threads. Each
// context is used by one thread at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/wait.h"
#include "bootstrap/socket.h"
#include "transports/tcp/wire.h"

namespace weft::tcp {

// How many largest frames of one context may be unconsumed at the other end.
inline constexpr size_t kWindowSlices = 4;

// How long a lost connection stays unreported (see Connection::fault()).
inline constexpr int64_t kLostGraceMs = 200;

class Connection {
 public:
  // socks[i]: the connected non-blocking socket of index i (same on both ends);
  // peer_addr ("10.0.0.2:4000") is shown in errors; frames larger than
  // max_slice are malformed.
  Connection(std::string peer_addr, std::vector<boot::Fd> socks, size_t max_slice);

  size_t nsocks() const { return socks_.size(); }
  const std::string& peer_addr() const { return peer_addr_; }

  // A context is open on both ends before either sends on it.
  void open(uint64_t ctx);
  // Its moved-aside frames are dropped and later ones discarded. A frame of it
  // still being written from its sender's buffer fails the connection (the
  // buffer is going away); senders give their buffers up with keep() first.
  void close(uint64_t ctx);

  enum class Put { Written, Started, Later };
  // Writes frame `h` (h.context names the context) and its payload on socket
  // i. Written: all of it; Started: part of it, the rest follows from
  // `payload` (which must stay valid until written(i, *id)); Later: nothing (the
  // socket is full or finishing another frame, or the context has no credit).
  Put put(size_t i, const FrameHeader& h, const unsigned char* payload, uint64_t* id);
  // Whether started frame `id` on socket i has been written out.
  bool written(size_t i, uint64_t id);
  // Its sender gives up the buffer of started frame `id`: the unwritten rest is copied.
  void keep(size_t i, uint64_t id);

  // Reads up to n bytes of ctx's stream on socket i (frame headers and
  // payloads, as sent). *got 0: nothing yet, or *eof: the peer closed the
  // socket at a frame boundary.
  void read(uint64_t ctx, size_t i, void* buf, size_t n, size_t* got, bool* eof);
  // Writes what is pending, and reads other contexts' frames and control frames.
  void pump(uint64_t ctx);
  // Waits at most `us` for any socket to become readable (or writable with
  // `writing`), unless bytes for ctx are already here.
  void wait(uint64_t ctx, int64_t us, bool writing);
  // Bytes ctx has moved aside, not yet read (for tests).
  size_t aside_bytes(uint64_t ctx);

  // The connection's sticky error, if any, phrased to follow "peer rank N at
  // ADDR": a local error at once, a lost connection after kLostGraceMs (when a
  // failure elsewhere makes a peer exit, the bootstrap's notice naming the
  // first cause should reach the caller first).
  struct Fault {
    weftResult_t code = weftSuccess;
    std::string what;
  };
  Fault fault();
  // Polls the sockets for errors and hang-ups (every socket closed with
  // nothing left for ctx counts as lost); fault() reports them.
  void check(uint64_t ctx);
  // The peer closed every socket with nothing more for the caller: reported
  // as a lost connection (after the grace).
  void closed();

 private:
  struct Aside {
    std::vector<unsigned char> bytes;  // the rest of one frame, as it was on the socket
    size_t filled = 0, taken = 0;
  };
  struct Context {
    std::vector<std::deque<Aside>> aside;  // per socket, in stream order
    size_t aside_bytes = 0;
    uint64_t consumed = 0, reported = 0;  // frame bytes handed to the context; told to the peer
    uint64_t sent = 0, acked = 0;         // frame bytes started; consumed by the peer
    bool starved = false;                 // a frame waits for credit ...
    bool asked = false;                   // ... and the peer was asked for it
    bool wanted = false;                  // the peer asked: answer once consumed > reported
  };
  // What happens to the rest of the frame at a socket's head.
  enum class Mode { Open, Aside, Drop };
  struct InSock {
    FrameHeader h{};
    size_t hdr_got = 0;
    bool in_frame = false;  // h is whole; its rest:
    Mode mode = Mode::Open;
    size_t hdr_left = 0;   // Open: header bytes not yet handed to the context
    size_t body_left = 0;  // payload bytes not yet read from the socket
    bool eof = false;
  };
  struct OutSock {
    bool busy = false;  // a frame is part written:
    FrameHeader h{};
    const unsigned char* payload = nullptr;
    std::vector<unsigned char> kept;
    size_t sent = 0;
    bool counted = false;            // a data frame (not a control frame): done counts it
    uint64_t started = 0, done = 0;  // frames put() started; of those, written
  };

  Context* find(uint64_t ctx);
  // Writes the part-written frame of socket i; true once the socket is free.
  bool finish(size_t i);
  // Writes h + payload from byte `sent` on; the new count (errors: fault).
  size_t write(size_t i, const FrameHeader& h, const unsigned char* payload, size_t sent);
  // Socket i is busy with this frame until the rest is written.
  void part_written(size_t i, const FrameHeader& h, const unsigned char* payload, size_t sent, bool counted);
  void send_controls();
  void write_pending();
  // recv() into buf; false on no data, close (sets eof or a fault) or error.
  bool recv(size_t i, void* buf, size_t n, size_t* got);
  // Reads socket i as far as it goes without handing anything to `caller`:
  // control frames are taken, other contexts' frames moved aside or dropped, and the
  // caller's own frames left at the head unless `own_too`.
  void advance(size_t i, uint64_t caller, bool own_too);
  // Queues the credit the peer asked for, once there is new consumption to report.
  void answer(Context& c, uint64_t ctx);
  bool anyone_starved() const;
  bool has_unread(const Context& c) const;
  void lost(std::string what);
  void failed(weftResult_t code, std::string what);

  std::string peer_addr_;
  std::vector<boot::Fd> socks_;
  size_t max_slice_;
  uint64_t window_;

  std::mutex mu_;
  std::map<uint64_t, Context> contexts_;
  std::vector<InSock> in_;
  std::vector<OutSock> out_;
  // Control frames to write: (context, kAskMagic or kCreditMagic).
  std::deque<std::pair<uint64_t, uint32_t>> controls_;
  std::vector<unsigned char> scratch_;  // dropped payloads land here
  std::atomic<bool> troubled_{false};  // error_ or lost_ is set
  Fault error_;  // sticky: a local or protocol error
  Fault lost_;   // sticky: the peer closed, reset or timed out (reported after the grace)
  Clock::time_point lost_at_{};
};

}  // namespace weft::tcp
