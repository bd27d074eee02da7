// A Link to a peer on the same host. Small messages are copied through the
// slot FIFO (flag and payload in one cache line for the smallest); large ones
// in weftMemAlloc memory stay where they are: the sender posts a descriptor and
// the receiver maps the sender's buffer and reads it in place. Large ones in
// ordinary memory are read in place with cross-memory attach (process_vm_readv)
// where that is fast, else copied through the FIFO (see cma_private).
#pragma once

#include <sys/types.h>

#include <deque>
#include <vector>

#include "transports/link.h"
#include "transports/shm/channel.h"
#include "transports/shm/memalloc.h"

namespace weft::shm {

struct LinkOptions {
  bool cma = false;          // the peer's memory can be read (process_vm_readv, /proc/pid/fd)
  bool cma_private = false;  // ... and reading ordinary buffers so beats the FIFO's copy
  size_t eager_max = 65536;  // larger messages go by rendezvous where allowed above
  size_t pull_bytes = 262144;
};

class ShmLink final : public transport::Link {
 public:
  // out: the channel this rank writes (in the peer's segment);
  // in: the channel the peer writes (in this rank's segment).
  ShmLink(int peer, pid_t peer_pid, ChannelView out, ChannelView in, LinkOptions opts);
  ~ShmLink() override;

  const char* name() const override { return opts_.cma_private ? "shm+cma" : "shm"; }
  uint64_t send(const void* data, size_t bytes, uint64_t tag) override;
  bool send_done(uint64_t ticket) override;
  void progress() override;
  Status poll_recv(transport::RecvOp& op, bool* complete) override;
  Status check_peer() override;

 private:
  struct SendItem {
    const unsigned char* data;
    size_t bytes;
    uint64_t tag;
    uint64_t ticket;
    size_t posted = 0;      // eager: payload bytes written into slots
    bool rndv = false;
    bool header_posted = false;
    uint64_t rndv_seq = 0;  // rendezvous: completes when rndv_done reaches this
  };

  bool slot_free();
  void post_slot(const SendItem& item, uint32_t kind, const void* payload, size_t bytes);
  bool item_done(const SendItem& item) const;
  Status pull(const RndvDescriptor& d, transport::RecvOp& op);
  void deliver(transport::RecvOp& op, const void* piece, size_t offset, size_t bytes);

  pid_t peer_pid_;
  int pidfd_ = -1;
  ChannelView out_, in_;
  LinkOptions opts_;

  // Sender side.
  std::deque<SendItem> queue_;
  uint64_t next_ticket_ = 0;
  uint64_t sent_slots_ = 0;
  uint64_t cached_head_ = 0;
  uint64_t rndv_posted_ = 0;

  // Receiver side.
  uint64_t recv_slots_ = 0;
  uint64_t rndv_received_ = 0;
  std::vector<unsigned char> bounce_;
  PeerMappings mappings_;
};

}  // namespace weft::shm
