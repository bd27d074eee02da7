// A Link to a peer on another host: one context on the reliable-connected
// queue pair the communicators of a family share (connection.h).
// NOT YET TESTED ON HARDWARE: the protocol below is unit-tested over an
// in-memory QueuePair (tests/unit/ibverbs/fake_queue_pair.h).
//
// Protocol. Each side owns a receive ring of `slots` slots of `slot_bytes`
// (a 64-byte SlotHeader, then payload) that the peer fills, in order, with
// RDMA writes with immediate; the immediate wakes the receiver (one posted
// zero-length receive per write) and names the context. A message is cut into
// slot-sized pieces; each piece is one write gathering the header from a
// registered staging array and the payload straight from the caller's buffer,
// registered through the link's RegCache (no copy on the sending side). The
// receiver hands each piece on from its slot (a plain receive copies it into
// place, a reduction consumes it there) and returns freed slots as credits
// (credits.h): a zero-length write whose immediate carries the low bits of its
// running total.
//
// A send is done when the completions of all its pieces have been seen: the
// NIC has read the buffer. Errors are sticky and name the peer; a failed
// completion carries the verbs status string and fails every context of the
// queue pair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transports/ibverbs/connection.h"
#include "transports/ibverbs/credits.h"
#include "transports/ibverbs/queue_pair.h"
#include "transports/ibverbs/reg_cache.h"
#include "transports/link.h"

namespace weft::ib {

struct SlotHeader {
  uint32_t magic;
  uint32_t piece_bytes;
  uint64_t slot_seq;   // slots this link has written before this one
  uint64_t msg_seq;    // messages sent before this one
  uint64_t tag;
  uint64_t msg_bytes;
  uint64_t offset;     // of this piece in its message
  uint64_t pad[2];
};
static_assert(sizeof(SlotHeader) == 64);

struct LinkOptions {
  uint32_t slots = 16;              // WEFT_IB_SLOTS
  uint32_t slot_bytes = 256 << 10;  // WEFT_IB_SLOT_BYTES, header included
  uint32_t credit_batch = 4;        // credits go back once this many slots are free
  size_t reg_cache_bytes = size_t{4} << 30;
};

// Where this side may write: the peer's ring, from its ConnInfo.
struct RemoteRing {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t slots = 0;
  uint32_t slot_bytes = 0;
  uint32_t context = 0;  // the index its owner's writes are addressed to
};

// A context's registered memory: the ring the peer writes into, the headers
// its own writes gather from, and the cache of the send buffers it registered.
// A closed context's stays with its connection until the peer is done with it.
struct ContextMemory {
  Registrar reg;
  void* ring = nullptr;
  Region ring_region{};
  std::vector<SlotHeader> staging;  // one header per peer slot
  Region staging_region{};
  std::unique_ptr<RegCache> cache;
  ~ContextMemory();
};

class IbLink final : public transport::Link {
 public:
  // Opens a context on `conn` for the link to `peer` (its rank in the
  // communicator): allocates and registers the receive ring, reserves the
  // context's share of the queue pair and posts its receives; an error when
  // the queue pair has no room left. The queue pair may still be unconnected
  // (receives can be posted in INIT).
  static Status create(std::shared_ptr<Connection> conn, int peer, LinkOptions opts,
                       std::unique_ptr<IbLink>* out);
  ~IbLink() override;

  // This side's ring and context, for the ConnInfo the peer receives: from
  // then on the peer may write to it.
  RemoteRing local_ring();
  // The peer's ring; before the first send.
  Status set_remote(const RemoteRing& r);
  const std::shared_ptr<Connection>& connection() const { return conn_; }

  const char* name() const override { return "ibverbs"; }
  uint64_t send(const void* data, size_t bytes, uint64_t tag) override;
  bool send_done(uint64_t ticket) override;
  void progress() override;
  Status poll_recv(transport::RecvOp& op, bool* complete) override;
  Status peek(transport::NextMessage* next) override;
  Status check_peer() override;
  void abandon_sends() override;

  const RegCache& reg_cache() const { return *mem_->cache; }

 private:
  friend class Connection;
  struct OutMsg {
    uint64_t ticket;
    const unsigned char* data;
    size_t bytes;
    uint64_t tag;
    uint64_t seq;
    size_t posted = 0;        // payload bytes posted
    bool all_posted = false;
    uint32_t in_flight = 0;   // pieces posted, completion not yet seen
    bool registered = false;
    Region region{};
  };

  IbLink(int peer, std::shared_ptr<Connection> conn, LinkOptions opts);
  // Callers hold the connection's lock.
  Status check();
  // A write to this context arrived (Connection::drain).
  void on_arrival(WriteKind kind, uint32_t count);
  // A write of this context completed.
  void on_written(uint64_t wr_id);
  bool post_pieces();
  void return_credits();
  void progress_locked();
  // The head slot is handed on (its credit returns); true when that completed the message.
  bool slot_consumed(const transport::RecvOp& op, bool* complete);
  void retire_done();
  OutMsg* find(uint64_t ticket);
  Status fail(Status st);

  std::shared_ptr<Connection> conn_;
  LinkOptions opts_;
  std::unique_ptr<ContextMemory> mem_;
  uint32_t index_ = 0;        // this context's index on the connection
  bool announced_ = false;    // the peer may know of it (local_ring() was given out)
  bool peer_closed_ = false;  // the peer's close notice arrived: nothing more will come
  Status error_;

  // Receiving: the ring the peer writes into.
  uint64_t arrived_ = 0;    // slots the peer has written (data immediates seen)
  uint64_t consumed_ = 0;   // slots handed on
  uint64_t recv_seq_ = 0;   // the message being received
  bool held_ = false;       // the consumer kept the head slot's piece: it stays until released
  ReceiverCredits recv_credits_;
  uint32_t credit_writes_ = 0;  // credit writes posted, completion not yet seen

  // Sending.
  RemoteRing remote_{};
  SenderCredits send_credits_{1};
  std::vector<bool> staging_busy_;   // its write's completion not yet seen
  uint64_t written_ = 0;             // slots written to the peer
  std::deque<OutMsg> out_;
  uint64_t next_ticket_ = 0;
  uint64_t send_seq_ = 0;
};

// The writes a context may have in flight each way (its share of a queue pair).
inline uint32_t context_budget(const LinkOptions& o) { return 2 * o.slots + 1; }

}  // namespace weft::ib
