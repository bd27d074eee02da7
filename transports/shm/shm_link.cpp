#include "transports/shm/shm_link.h"

#include <utility>

namespace weft::shm {

ShmLink::ShmLink(int peer, std::shared_ptr<void> owner, PeerChannel* ch, uint32_t remote, uint32_t in)
    : Link(peer), owner_(std::move(owner)), ch_(ch), out_(ch->open_out(remote)), in_(in) {}

ShmLink::~ShmLink() {
  ch_->close_out(out_);
  ch_->close_in(in_);
}

}  // namespace weft::shm
