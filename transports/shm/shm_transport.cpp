#include "transports/shm/shm_transport.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/params.h"
#include "transports/shm/shm_link.h"

namespace weft::shm {
namespace {

const volatile uint64_t kProbeWord = 0x7765667450524f42ull;  // "weftPROB"

ChannelLayout layout_from_params() {
  size_t slot = static_cast<size_t>(params::SHM_SLOT_BYTES());
  slot = (slot + kCacheLine - 1) / kCacheLine * kCacheLine;
  if (slot < kCacheLine) slot = kCacheLine;
  size_t nslots = static_cast<size_t>(params::SHM_SLOTS());
  if (nslots < 2) nslots = 2;
  return {slot, nslots};
}

bool probe_cma(const LocalPeer& p) {
  if (params::SHM_CMA() == 0) return false;
  uint64_t value = 0;
  struct iovec l{&value, sizeof(value)};
  struct iovec r{reinterpret_cast<void*>(p.cma_probe), sizeof(value)};
  ssize_t rc = process_vm_readv(p.pid, &l, 1, &r, 1, 0);
  if (rc == static_cast<ssize_t>(sizeof(value)) && value == kProbeWord) return true;
  WEFT_INFO(TRANSPORT,
            "cross-memory attach to rank %d (pid %d) refused (%s); large messages are copied "
            "through shared memory instead",
            p.rank, p.pid, rc < 0 ? strerror(errno) : "wrong probe value");
  return false;
}

}  // namespace

uint64_t cma_probe_address() { return reinterpret_cast<uint64_t>(&kProbeWord); }

std::string ShmTransport::segment_name(int rank) const {
  return prefix_ + "-" + std::to_string(rank);
}

Status ShmTransport::create(const std::string& name_prefix, int rank, std::vector<LocalPeer> local,
                            std::unique_ptr<ShmTransport>* out) {
  std::unique_ptr<ShmTransport> t(new ShmTransport);
  t->prefix_ = name_prefix;
  t->rank_ = rank;
  t->local_ = std::move(local);
  for (size_t i = 0; i < t->local_.size(); ++i)
    if (t->local_[i].rank == rank) t->my_index_ = static_cast<int>(i);
  if (t->my_index_ < 0) return Error(weftInternalError, "rank %d missing from its own host group", rank);
  t->channel_bytes_ = layout_from_params().bytes();
  size_t bytes = t->channel_bytes_ * t->local_.size();
  WEFT_TRY(Segment::create(t->segment_name(rank), bytes, &t->own_));
  *out = std::move(t);
  return Status::Ok();
}

Status ShmTransport::connect(std::vector<std::unique_ptr<transport::Link>>* links) {
  ChannelLayout layout = layout_from_params();
  LinkOptions opts;
  opts.eager_max = static_cast<size_t>(params::SHM_EAGER_MAX());
  opts.pull_bytes = static_cast<size_t>(params::SHM_PULL_BYTES());
  peers_.resize(local_.size());
  size_t bytes = channel_bytes_ * local_.size();
  for (size_t i = 0; i < local_.size(); ++i) {
    if (static_cast<int>(i) == my_index_) continue;
    const LocalPeer& p = local_[i];
    Status st = Segment::attach(segment_name(p.rank), bytes, &peers_[i]);
    if (!st.ok()) return st.prefix("connecting to local peer rank " + std::to_string(p.rank) + ": ");
    auto* peer_base = static_cast<unsigned char*>(peers_[i].data());
    auto* own_base = static_cast<unsigned char*>(own_.data());
    // My outbound channel to p sits in p's segment at my index, and vice versa.
    ChannelView out(peer_base + channel_bytes_ * static_cast<size_t>(my_index_), layout);
    ChannelView in(own_base + channel_bytes_ * i, layout);
    opts.cma = probe_cma(p);
    links->push_back(std::make_unique<ShmLink>(p.rank, p.pid, out, in, opts));
    WEFT_INFO(TRANSPORT, "rank %d -> rank %d via %s (%zu slots x %zu B, eager <= %zu B)", rank_,
              p.rank, links->back()->name(), layout.nslots, layout.slot_bytes, opts.eager_max);
  }
  return Status::Ok();
}

}  // namespace weft::shm
