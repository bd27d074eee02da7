// One rank's pair of channels with one local peer: the one it writes (in the
// peer's segment) and the one it reads (in its own). Every communicator of a
// family (those split from one communicator) that connects the two ranks uses
// the same pair through its own context, so a family of 64 communicators costs
// the FIFOs of one.
//
// A slot carries the receiver's context number. A receiver polling for one
// context that finds another's slot at the head moves it aside (a copy of the
// payload; for a rendezvous slot, only its descriptor) so that no communicator
// waits behind another's messages; a sender keeps at most a FIFO's worth of a
// context's slots unconsumed, which bounds what is moved aside. Rendezvous
// completions and consumed slots are counted per context.
//
// Thread-safe: communicators of one family are driven from different threads.
// Each context is driven by one thread at a time (its communicator's queue).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "base/wait.h"
#include "transports/link.h"
#include "transports/shm/channel.h"
#include "transports/shm/memalloc.h"
#include "transports/shm/slot_copy.h"

namespace weft::shm {

struct LinkOptions {
  bool cma = false;          // the peer's memory can be read (process_vm_readv, /proc/pid/fd)
  bool cma_private = false;  // ... and reading ordinary buffers so beats the FIFO's copy
  size_t eager_max = 65536;  // larger messages go by rendezvous where allowed above
  size_t pull_bytes = 262144;
  SlotCopy::Mode stream = SlotCopy::Mode::Auto;  // full slots of messages larger than one (slot_copy.h)
  int stream_pct = 45;
};

// A context as both ends name it: index | generation << 16.
constexpr uint32_t kNoContext = 0xffffffffu;

class PeerChannel {
 public:
  // out: the channel this rank writes (in the peer's segment);
  // in: the channel the peer writes (in this rank's segment).
  PeerChannel(pid_t peer_pid, ChannelView out, ChannelView in, LinkOptions opts);
  ~PeerChannel();
  PeerChannel(const PeerChannel&) = delete;
  PeerChannel& operator=(const PeerChannel&) = delete;

  const LinkOptions& options() const { return opts_; }

  // A new receiving context (the first on a fresh channel is 0, generation 0),
  // or kNoContext when kMaxContexts are open.
  uint32_t open_in();
  void close_in(uint32_t ctx);
  // A sending context writing to the peer's receiving context `remote`: the
  // handle the calls below take, valid until close_out.
  struct OutContext;
  OutContext* open_out(uint32_t remote);
  void close_out(OutContext* out);

  // As transport::Link's, for one context; `peer` is the communicator's rank
  // of the peer, for errors.
  uint64_t send(OutContext* out, const void* data, size_t bytes, uint64_t tag);
  bool send_done(OutContext* out, uint64_t ticket);
  void progress(OutContext* out);
  Status poll_recv(uint32_t in, transport::RecvOp& op, bool* complete, int peer);
  // Context `in`'s next message (other contexts' slots on the way are set aside).
  void peek(uint32_t in, transport::NextMessage* next);
  Status check_peer(int peer);
  // What reading the peer's timed slots has cost this end, as published to the
  // peer's sender (ticks per byte; 0: no such slot read yet).
  double read_cost(bool streamed) const;
  // Bytes the receiving contexts hold in buffers of their own (bounce buffers,
  // payloads moved aside or kept): a closed context holds none.
  size_t held_bytes();

 private:
  struct SendItem {
    const unsigned char* data;
    size_t bytes;
    uint64_t tag;
    uint64_t ticket;
    size_t posted = 0;      // eager: payload bytes written into slots
    bool rndv = false;
    bool header_posted = false;
    uint64_t rndv_seq = 0;  // rendezvous: completes when the context's rndv_done reaches this
  };

 public:
  struct OutContext {
    uint16_t index = 0;
    uint8_t gen = 0;
    bool open = false;
    std::deque<SendItem> queue;
    uint64_t next_ticket = 0;
    uint64_t posted = 0;  // slots written for this context
    uint64_t cached_consumed = 0;
    uint64_t rndv_posted = 0;
  };

 private:
  // A slot of a context that was not receiving when it reached the head.
  struct SetAside {
    uint64_t tag, msg_bytes;
    uint32_t bytes;
    uint8_t kind;
    std::vector<unsigned char> payload;
  };
  struct InContext {
    uint8_t gen = 0;
    bool open = false;
    std::deque<SetAside> aside;
    uint64_t consumed = 0;
    uint64_t rndv_received = 0;
    std::vector<unsigned char> bounce;  // cross-memory-attach reads for a consumer
    // A piece the consumer kept (Consumer::released() not yet true): a FIFO slot
    // (the published head waits for it) or a payload moved aside.
    bool holding = false;
    bool holds_slot = false;
    std::vector<std::vector<unsigned char>> kept;
  };

  bool slot_free(OutContext& c);
  void post_slot(OutContext& c, const SendItem& item, uint32_t kind, const void* payload, size_t bytes);
  bool item_done(const OutContext& c, const SendItem& item) const;
  void progress_locked(OutContext& c);
  void set_aside(const SlotHeader* h, const void* payload);
  // The FIFO's head slot is read: the sender may reuse it unless a context
  // holds an earlier one.
  void take_slot();
  void release(InContext& c);
  Status pull(const RndvDescriptor& d, InContext& c, transport::RecvOp& op, int peer);
  // Whether the consumer is done with the piece now (a plain receive always is).
  static bool deliver(transport::RecvOp& op, const void* piece, size_t offset, size_t bytes);
  // For a piece whose memory is reused next: waits until the consumer read it.
  static Status wait_released(transport::RecvOp& op, int peer);

  pid_t peer_pid_;
  int pidfd_ = -1;
  ChannelView out_, in_;
  LinkOptions opts_;

  // Sender side, under send_mu_.
  SpinLock send_mu_;
  std::vector<std::unique_ptr<OutContext>> outs_;
  uint64_t sent_slots_ = 0;
  uint64_t cached_head_ = 0;
  SlotCopy slot_copy_;

  // Receiver side, under recv_mu_ (a rendezvous read runs outside it).
  SpinLock recv_mu_;
  std::vector<std::unique_ptr<InContext>> ins_;  // index = context number
  uint64_t recv_slots_ = 0;  // slots read; published as the head unless a slot is held
  TickAverage read_cost_[2];  // reading timed slots, [cached, streamed] stores; published in the head line
  int holders_ = 0;          // contexts holding a FIFO slot
  std::mutex map_mu_;  // mappings_ and reads through them
  PeerMappings mappings_;
};

}  // namespace weft::shm
