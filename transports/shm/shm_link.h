// A Link to a peer on the same host: one communicator's context on the pair of
// channels its family keeps with that peer (peer_channel.h). Small messages are
// copied through the slot FIFO (flag and payload in one cache line for the
// smallest); large ones in weftMemAlloc memory stay where they are: the sender
// posts a descriptor and the receiver maps the sender's buffer and reads it in
// place. Large ones in ordinary memory are read in place with cross-memory
// attach (process_vm_readv) where that is fast, else copied through the FIFO
// (see LinkOptions::cma_private).
#pragma once

#include <memory>

#include "transports/link.h"
#include "transports/shm/peer_channel.h"

namespace weft::shm {

class ShmLink final : public transport::Link {
 public:
  // Writes to the peer's receiving context `remote`, reads its own context `in`
  // (opened on `ch` for this link, closed with it). `owner` keeps `ch` alive.
  ShmLink(int peer, std::shared_ptr<void> owner, PeerChannel* ch, uint32_t remote, uint32_t in);
  ~ShmLink() override;

  const char* name() const override { return ch_->options().cma_private ? "shm+cma" : "shm"; }
  uint64_t send(const void* data, size_t bytes, uint64_t tag) override { return ch_->send(out_, data, bytes, tag); }
  bool send_done(uint64_t ticket) override { return ch_->send_done(out_, ticket); }
  void progress() override { ch_->progress(out_); }
  Status poll_recv(transport::RecvOp& op, bool* complete) override {
    return ch_->poll_recv(in_, op, complete, peer());
  }
  Status peek(transport::NextMessage* next) override {
    ch_->peek(in_, next);
    return Status::Ok();
  }
  Status check_peer() override { return ch_->check_peer(peer()); }

 private:
  std::shared_ptr<void> owner_;
  PeerChannel* ch_;
  PeerChannel::OutContext* out_;
  uint32_t in_;
};

}  // namespace weft::shm
