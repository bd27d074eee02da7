#include "transports/cuda_p2p/p2p_pairs.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "base/log.h"
#include "base/wait.h"
#include "transports/cuda_p2p/flag_page.h"
#include "transports/cuda_p2p/p2p_group.h"

namespace weft::transport::cuda_p2p {
namespace {

using exec::cuda::dptr;

// The flag page: posted[peer], then taken[peer], then the done word (calls this
// rank's stream has finished).
constexpr size_t kPageBytes = 8192;
constexpr size_t kPosted = 0, kTaken = kMaxRanks, kDone = 2 * kMaxRanks;
static_assert((kDone + 1) * sizeof(uint32_t) <= kPageBytes);

bool behind(uint32_t word, uint64_t want) { return static_cast<int32_t>(word - static_cast<uint32_t>(want)) < 0; }

// Calls f(dst or src piece, bytes, offset in the chunk) for bytes [from, from + n)
// of the pieces laid end to end.
template <class F>
Status each_piece(const std::vector<Pairs::Op>& pieces, uint64_t from, size_t n, F f) {
  uint64_t at = 0;
  size_t done = 0;
  for (const Pairs::Op& p : pieces) {
    if (done == n) break;
    if (from + done < at + p.bytes) {
      const uint64_t in = from + done - at;
      const size_t len = static_cast<size_t>(std::min<uint64_t>(p.bytes - in, n - done));
      WEFT_TRY(f(static_cast<unsigned char*>(p.buf) + in, len, done));
      done += len;
    }
    at += p.bytes;
  }
  return Status::Ok();
}

}  // namespace

struct Pairs::Card {
  int32_t pid = 0;
  int32_t flags_fd = -1;
  int32_t device = -1;
  int32_t ready = 0;  // 0: why_not says why this rank cannot take part
  uint64_t region_bytes = 0;
  char bus_id[32] = {};
  exec::cuda::IpcHandle handle{};  // its area (device memory)
  int32_t area_fd = -1;            // its area (host_area)
  char why_not[108] = {};
};

Pairs::Pairs(const exec::cuda::Api& d, Options o) : d_(d), o_(std::move(o)), peers_(static_cast<size_t>(o_.nranks)) {}

uint32_t Pairs::word(size_t i) const {
  return load_flag(flags_ + i);
}

std::string Pairs::prepare() {
  prepared_ = true;
  if (!o_.disabled_by.empty()) return o_.disabled_by;
  if (o_.nranks > kMaxRanks) return "more than " + std::to_string(kMaxRanks) + " ranks";
  for (auto [entry, name] : {std::pair{d_.mem_alloc != nullptr, "cuMemAlloc"},
                             {d_.ipc_get_handle != nullptr, "cuIpcGetMemHandle"},
                             {d_.ipc_open_handle != nullptr, "cuIpcOpenMemHandle"},
                             {d_.host_register != nullptr, "cuMemHostRegister"},
                             {d_.pci_bus_id != nullptr, "cuDeviceGetPCIBusId"},
                             {d_.device_by_pci_bus_id != nullptr, "cuDeviceGetByPCIBusId"},
                             {d_.can_access_peer != nullptr, "cuDeviceCanAccessPeer"},
                             {d_.ctx_get_device != nullptr, "cuCtxGetDevice"}})
    if (!entry) return std::string("the CUDA driver lacks ") + name;
  // A region per peer of two slots of a multiple of 4 KiB.
  const size_t per = o_.buffer_bytes / static_cast<size_t>(o_.nranks) / 8192 * 8192;
  region_ = std::max<size_t>(8192, per);
  exec::cuda::DevicePtr base = 0;
  const size_t bytes = region_ * static_cast<size_t>(o_.nranks);
  if (o_.host_area) {
    Status st = create_flag_page(bytes, &area_fd_);
    if (st.ok()) st = map_flag_page(d_, area_fd_, bytes, &area_host_, &base);
    if (!st.ok()) return "its area in host memory: " + st.message();
  } else if (int rc = d_.mem_alloc(&base, bytes)) {
    return "cuMemAlloc of " + std::to_string(bytes) + " bytes: " + exec::cuda::error_text(rc);
  }
  area_ = reinterpret_cast<unsigned char*>(base);
  Status st = create_flag_page(kPageBytes, &memfd_);
  if (st.ok()) st = map_flag_page(d_, memfd_, kPageBytes, &flags_, &flags_dev_);
  return st.ok() ? "" : st.message();
}

std::string Pairs::connect(Peer& p, const Card& c) {
  if (c.region_bytes != region_) return "its WEFT_P2P_BUFFER_BYTES differs";
  if (o_.host_area) {
    exec::cuda::DevicePtr base = 0;
    Status st = map_peer_flag_page(d_, c.pid, c.area_fd, region_ * static_cast<size_t>(o_.nranks), &p.area_host, &base);
    if (!st.ok()) return "its area in host memory: " + st.message();
    p.area = reinterpret_cast<unsigned char*>(base);
    st = map_peer_flag_page(d_, c.pid, c.flags_fd, kPageBytes, &p.flags, &p.flags_dev);
    return st.ok() ? "" : st.message();
  }
  int mine = -1;
  char bus[32] = {};
  if (d_.ctx_get_device(&mine) != 0 || d_.pci_bus_id(bus, sizeof bus, mine) != 0)
    return "no CUDA context is current on the calling thread";
  if (std::strncmp(c.bus_id, bus, sizeof bus) != 0) {
    if (o_.same_gpu_only) return std::string("its GPU ") + c.bus_id + " is not this rank's (WEFT_P2P_LEVEL=LOC)";
    int dev = -1, can = 0;
    if (d_.device_by_pci_bus_id(&dev, c.bus_id) != 0) return std::string("its GPU ") + c.bus_id + " is not visible here";
    if (d_.can_access_peer(&can, mine, dev) != 0 || can == 0)
      return std::string("its GPU ") + c.bus_id + " cannot be accessed from " + bus + " (cuDeviceCanAccessPeer)";
  }
  exec::cuda::DevicePtr base = 0;
  if (int rc = d_.ipc_open_handle(&base, c.handle, exec::cuda::kIpcLazyEnablePeerAccess))
    return "cuIpcOpenMemHandle of its area: " + exec::cuda::error_text(rc);
  p.area = reinterpret_cast<unsigned char*>(base);
  Status st = map_peer_flag_page(d_, c.pid, c.flags_fd, kPageBytes, &p.flags, &p.flags_dev);
  return st.ok() ? "" : st.message();
}

Status Pairs::route(int peer, const Swap& swap, bool* p2p) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  // Another host: staged, as the peer sees too, with nothing to swap.
  if (p.route == Peer::Route::Unknown && !o_.same_host[static_cast<size_t>(peer)])
    stage(peer, "it is on another host");
  if (p.route == Peer::Route::Unknown) {
    {
      std::lock_guard<std::mutex> lock(mu_);  // unblock() reads the page from any thread
      if (!prepared_) unusable_ = prepare();
    }
    Card mine;
    mine.pid = static_cast<int32_t>(getpid());
    mine.flags_fd = memfd_;
    mine.region_bytes = region_;
    mine.ready = unusable_.empty() ? 1 : 0;
    std::snprintf(mine.why_not, sizeof mine.why_not, "%s", unusable_.c_str());
    mine.area_fd = area_fd_;
    if (mine.ready) {
      if (d_.ctx_get_device(&mine.device) != 0 || d_.pci_bus_id(mine.bus_id, sizeof mine.bus_id, mine.device) != 0 ||
          (!o_.host_area && d_.ipc_get_handle(&mine.handle, dptr(area_)) != 0)) {
        mine.ready = 0;
        std::snprintf(mine.why_not, sizeof mine.why_not, "its GPU or area could not be described");
      }
    }
    Card theirs;
    WEFT_TRY(swap(&mine, &theirs, sizeof(Card)));
    struct Verdict {
      char why[160];
    } verdict{}, other{};
    std::string why = !mine.ready ? std::string("this rank: ") + mine.why_not
                      : !theirs.ready ? std::string("rank ") + std::to_string(peer) + ": " + theirs.why_not
                                      : connect(p, theirs);
    std::snprintf(verdict.why, sizeof verdict.why, "%s", why.c_str());
    WEFT_TRY(swap(&verdict, &other, sizeof(Verdict)));
    if (why.empty() && other.why[0] != 0) why = std::string("rank ") + std::to_string(peer) + " sees " + other.why;
    if (!why.empty()) {
      stage(peer, why.c_str());
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      p.route = Peer::Route::P2P;
      WEFT_INFO(TRANSPORT, "rank %d: point-to-point on device memory with rank %d over cuda_p2p%s", o_.rank, peer,
                o_.host_area ? " (its area in pinned host memory)" : "");
      if (watchdog_ == nullptr) watchdog_ = std::make_unique<Watchdog>(flags_ + kDone, o_.timeout_ms, o_.on_timeout);
    }
  }
  *p2p = p.route == Peer::Route::P2P;
  return Status::Ok();
}

void Pairs::stage(int peer, const char* why) {
  std::lock_guard<std::mutex> lock(mu_);
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.route != Peer::Route::Unknown) return;
  p.route = Peer::Route::Staged;
  WEFT_INFO(TRANSPORT, "rank %d: point-to-point on device memory with rank %d staged through pinned host memory: %s",
            o_.rank, peer, why);
}

Status Pairs::step(int rc, exec::cuda::Stream s, const char* doing) {
  if (rc == 0) return Status::Ok();
  broken_ = true;
  return Error(weftUnhandledCudaError, "cuda_p2p point-to-point on stream %p: %s: %s", s, doing,
               exec::cuda::error_text(rc).c_str());
}

Status Pairs::call(const std::vector<Op>& ops, const std::vector<Copy>& copies, exec::cuda::Stream s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) return Error(weftInternalError, "cuda_p2p: an earlier point-to-point call failed part-way on this communicator");
  for (const Copy& c : copies)
    if (c.bytes > 0 && c.dst != c.src)
      WEFT_TRY(step(d_.copy_async(dptr(c.dst), dptr(c.src), c.bytes, s), s, "copying within the rank"));
  // Each peer's sends and receives, in the order given.
  std::map<int, std::vector<Op>> out, in;
  for (const Op& op : ops)
    if (op.bytes > 0) (op.send ? out : in)[op.peer].push_back(op);
  auto total = [](const std::vector<Op>& v) {
    uint64_t t = 0;
    for (const Op& o : v) t += o.bytes;
    return t;
  };
  const size_t slot = region_ / 2;
  uint64_t rounds = 0;
  for (auto* side : {&out, &in})
    for (const auto& [peer, pieces] : *side) rounds = std::max(rounds, (total(pieces) + slot - 1) / slot);
  std::vector<std::pair<int, uint64_t>> want_posted, want_taken;  // for the watchdog: what the stream waits for
  const auto me = static_cast<size_t>(o_.rank);
  for (uint64_t r = 0; r < rounds; ++r) {
    for (const auto& [q, pieces] : out) {
      const uint64_t all = total(pieces);
      if (r * slot >= all) continue;
      Peer& p = peers_[static_cast<size_t>(q)];
      const size_t n = static_cast<size_t>(std::min<uint64_t>(slot, all - r * slot));
      const int which = static_cast<int>(p.posts % 2);
      unsigned char* dst = area_ + static_cast<size_t>(q) * region_ + static_cast<size_t>(which) * slot;
      WEFT_TRY(step(d_.wait_value32(s, flags_dev_ + (kTaken + static_cast<size_t>(q)) * sizeof(uint32_t),
                                    static_cast<uint32_t>(p.slot_end[which]), exec::cuda::kWaitValueGeq),
                    s, "waiting for the peer to take the slot's last chunk"));
      want_taken.emplace_back(q, p.slot_end[which]);
      WEFT_TRY(each_piece(pieces, r * slot, n, [&](unsigned char* src, size_t len, size_t at) {
        return step(d_.copy_async(dptr(dst + at), dptr(src), len, s), s, "copying a send into its slot");
      }));
      p.posted += n;
      p.slot_end[which] = p.posted;
      ++p.posts;
      WEFT_TRY(step(d_.write_value32(s, p.flags_dev + (kPosted + me) * sizeof(uint32_t),
                                     static_cast<uint32_t>(p.posted), 0),
                    s, "posting a chunk"));
    }
    for (const auto& [q, pieces] : in) {
      const uint64_t all = total(pieces);
      if (r * slot >= all) continue;
      Peer& p = peers_[static_cast<size_t>(q)];
      const size_t n = static_cast<size_t>(std::min<uint64_t>(slot, all - r * slot));
      const int which = static_cast<int>(p.takes % 2);
      const unsigned char* src = p.area + me * region_ + static_cast<size_t>(which) * slot;
      WEFT_TRY(step(d_.wait_value32(s, flags_dev_ + (kPosted + static_cast<size_t>(q)) * sizeof(uint32_t),
                                    static_cast<uint32_t>(p.taken + n), exec::cuda::kWaitValueGeq),
                    s, "waiting for the peer's chunk"));
      want_posted.emplace_back(q, p.taken + n);
      WEFT_TRY(each_piece(pieces, r * slot, n, [&](unsigned char* dst, size_t len, size_t at) {
        return step(d_.copy_async(dptr(dst), dptr(src + at), len, s), s, "copying a receive out of the peer's slot");
      }));
      p.taken += n;
      ++p.takes;
      WEFT_TRY(step(d_.write_value32(s, p.flags_dev + (kTaken + me) * sizeof(uint32_t),
                                     static_cast<uint32_t>(p.taken), 0),
                    s, "taking a chunk"));
    }
  }
  ++calls_;
  WEFT_TRY(step(d_.write_value32(s, flags_dev_ + kDone * sizeof(uint32_t), calls_, 0), s, "marking the call done"));
  watchdog_->add("point-to-point", s, calls_,
                 [this, want_posted, want_taken] { return stuck(want_posted, want_taken); });
  return Status::Ok();
}

// The peers a stuck call's stream waits for: those that have not posted what it
// receives, or not taken what it sent before reusing a slot.
std::string Pairs::stuck(const std::vector<std::pair<int, uint64_t>>& want_posted,
                         const std::vector<std::pair<int, uint64_t>>& want_taken) {
  std::lock_guard<std::mutex> lock(mu_);
  // Once unblock() has overwritten the words, as they were before.
  auto word = [&](size_t i) { return released_.empty() ? this->word(i) : released_[i]; };
  std::string late;
  auto add = [&](int q, const char* what) {
    late += (late.empty() ? "" : ", ") + std::to_string(q) + " (" + what + ")";
  };
  for (const auto& [q, v] : want_posted)
    if (behind(word(kPosted + static_cast<size_t>(q)), v)) {
      add(q, "has not sent what this rank receives");
      break;
    }
  for (const auto& [q, v] : want_taken)
    if (behind(word(kTaken + static_cast<size_t>(q)), v)) {
      add(q, "has not received what this rank sent");
      break;
    }
  return late.empty() ? "its stream has not reached it (work before it on the stream has not finished)"
                      : "its stream waits for rank " + late;
}

void Pairs::unblock() {
  std::lock_guard<std::mutex> lock(mu_);
  if (flags_ == nullptr) return;
  if (released_.empty())
    for (size_t i = 0; i < kDone; ++i) released_.push_back(word(i));
  // Far ahead of every wait enqueued so far (the waits compare cyclically).
  for (size_t q = 0; q < peers_.size(); ++q) {
    store_flag(flags_ + kPosted + q, static_cast<uint32_t>(peers_[q].taken + (1u << 30)));
    store_flag(flags_ + kTaken + q, static_cast<uint32_t>(peers_[q].posted + (1u << 30)));
  }
}

void Pairs::stop_watchdog() {
  if (watchdog_ != nullptr) watchdog_->stop();
}

Pairs::~Pairs() {
  stop_watchdog();
  const size_t area_bytes = region_ * peers_.size();
  auto free_area = [&] {
    if (o_.host_area) unmap_flag_page(d_, area_host_, area_bytes);
    else if (area_ != nullptr) d_.mem_free(dptr(area_));
    if (area_fd_ >= 0) close(area_fd_);
  };
  if (flags_ == nullptr) {  // never prepared, or preparing failed part-way
    free_area();
    if (memfd_ >= 0) close(memfd_);
    return;
  }
  // This rank's stream must be past its last call (it reads the peers' areas),
  // and every peer must have taken what it posted (they read this rank's area).
  Deadline deadline = Deadline::after_ms(o_.timeout_ms);
  SpinWait wait;
  bool finished = !broken_;
  auto settled = [&] {
    if (behind(word(kDone), calls_)) return false;
    for (size_t q = 0; q < peers_.size(); ++q)
      if (peers_[q].route == Peer::Route::P2P && behind(word(kTaken + q), peers_[q].posted)) return false;
    return true;
  };
  while (finished && !settled()) {
    if (deadline.expired()) finished = false;
    else wait.pause();
  }
  if (!finished) {
    WEFT_WARN(INIT, "cuda_p2p: point-to-point calls not finished by a stream or not received by a peer after %lld ms "
              "(or a call failed part-way): this rank's %zu bytes of device memory and the peers' mappings stay",
              static_cast<long long>(o_.timeout_ms), region_ * peers_.size());
    return;
  }
  for (Peer& p : peers_) {
    unmap_flag_page(d_, p.flags, kPageBytes);
    if (o_.host_area) unmap_flag_page(d_, p.area_host, area_bytes);
    else if (p.area != nullptr) d_.ipc_close_handle(dptr(p.area));
  }
  unmap_flag_page(d_, flags_, kPageBytes);
  free_area();
  close(memfd_);
}

}  // namespace weft::transport::cuda_p2p
