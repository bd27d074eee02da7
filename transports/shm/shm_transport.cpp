#include "transports/shm/shm_transport.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "base/params.h"
#include "base/wait.h"
#include "transports/family.h"
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

// Whether reading a peer's ordinary buffer with process_vm_readv beats copying
// it through the FIFO. The FIFO costs the sender a memcpy into cache-resident
// slots and the receiver a cache-to-cache read; cross-memory attach costs one
// kernel copy, but pins every page first. On an AMD EPYC VM (2026-11-23) it
// read 3.5-4.8 GB/s against memcpy's 12-14 GB/s into a pull-sized buffer, and
// the FIFO path gave 2-3x the all-reduce busbw at 64 MiB (2 and 4 ranks); where
// pinning is cheap the single copy wins. Timed once per process, on its own
// memory (the best of three rounds of each).
bool cma_beats_fifo() {
  static const bool fast = [] {
    if (params::SHM_CMA() >= 0) return params::SHM_CMA() != 0;
    const size_t piece = std::max<size_t>(static_cast<size_t>(params::SHM_PULL_BYTES()), 4096);
    const size_t total = std::max(piece, size_t{4} << 20) / piece * piece;
    std::vector<unsigned char> src(total, 1), dst(piece, 0);
    double cma_s = 1e9, copy_s = 1e9;
    for (int round = 0; round < 3; ++round) {
      auto t0 = Clock::now();
      for (size_t off = 0; off < total; off += piece) {
        struct iovec l{dst.data(), piece};
        struct iovec r{src.data() + off, piece};
        if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != static_cast<ssize_t>(piece)) return false;
      }
      auto t1 = Clock::now();
      for (size_t off = 0; off < total; off += piece) std::memcpy(dst.data(), src.data() + off, piece);
      asm volatile("" : : "r"(dst.data()) : "memory");  // keep the copies
      auto t2 = Clock::now();
      cma_s = std::min(cma_s, std::chrono::duration<double>(t1 - t0).count());
      copy_s = std::min(copy_s, std::chrono::duration<double>(t2 - t1).count());
    }
    double pct = 100.0 * copy_s / cma_s;
    bool wins = pct >= static_cast<double>(params::SHM_CMA_MIN_PCT());
    WEFT_INFO(TRANSPORT,
              "process_vm_readv reads %.1f GB/s, memcpy copies %.1f GB/s (%.0f%%, "
              "WEFT_SHM_CMA_MIN_PCT=%lld): large messages in ordinary buffers %s",
              static_cast<double>(total) / cma_s / 1e9, static_cast<double>(total) / copy_s / 1e9, pct,
              static_cast<long long>(params::SHM_CMA_MIN_PCT()),
              wins ? "are read in place" : "are copied through the FIFO");
    return wins;
  }();
  return fast;
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
                            std::shared_ptr<ShmTransport>* out) {
  std::shared_ptr<ShmTransport> t(new ShmTransport);
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

Status ShmTransport::connect(std::optional<bool> read_private_in_place) {
  ChannelLayout layout = layout_from_params();
  LinkOptions opts;
  opts.eager_max = static_cast<size_t>(params::SHM_EAGER_MAX());
  opts.pull_bytes = static_cast<size_t>(params::SHM_PULL_BYTES());
  opts.stream = static_cast<SlotCopy::Mode>(std::clamp<int64_t>(params::SHM_STREAM(), -1, 1));
  opts.stream_pct = static_cast<int>(params::SHM_STREAM_PCT());
  peers_.resize(local_.size());
  channels_.resize(local_.size());
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
    opts.cma_private = opts.cma && read_private_in_place.value_or(cma_beats_fifo());
    channels_[i] = std::make_unique<PeerChannel>(p.pid, out, in, opts);
    WEFT_INFO(TRANSPORT, "rank %d -> rank %d via shm%s (%zu slots x %zu B, eager <= %zu B%s)", rank_, p.rank,
              opts.cma_private ? "+cma" : "", layout.nslots, layout.slot_bytes, opts.eager_max,
              opts.stream == SlotCopy::Mode::Auto ? ", stores chosen by timing"
              : opts.stream == SlotCopy::Mode::Streaming ? ", streaming stores" : "");
  }
  return Status::Ok();
}

PeerChannel* ShmTransport::channel(int rank) {
  for (size_t i = 0; i < local_.size(); ++i)
    if (local_[i].rank == rank && i < channels_.size()) return channels_[i].get();
  return nullptr;
}

std::unique_ptr<transport::Link> ShmTransport::link(int rank, int peer, uint32_t remote, uint32_t in) {
  return std::make_unique<ShmLink>(peer, shared_from_this(), channel(rank), remote, in);
}

namespace {
transport::FamilyRegistry<std::pair<uint64_t, int>, ShmTransport>& families() {
  static auto* r = new transport::FamilyRegistry<std::pair<uint64_t, int>, ShmTransport>;
  return *r;
}
}  // namespace

void ShmTransport::enroll(uint64_t family, int rank, const std::shared_ptr<ShmTransport>& t) {
  families().enroll({family, rank}, t);
}

std::shared_ptr<ShmTransport> ShmTransport::find(uint64_t family, int rank) { return families().find({family, rank}); }

}  // namespace weft::shm
