#include "transports/cuda_p2p/p2p_group.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/log.h"
#include "base/wait.h"
#include "transports/cuda_p2p/flag_page.h"

namespace weft::transport::cuda_p2p {
namespace {

using exec::cuda::dptr;

constexpr size_t kPage = 4096;
constexpr int kDoneWord = kMaxRanks;  // the owner's stream: the last barrier whose call it finished
// A flag page: the eager barriers' words and the done word in the first 4 KiB;
// then the graph barriers' where word (2j + 2: the owner's stream waits at slot
// j; 2j + 3: it passed) and their slots, one word per rank each.
constexpr size_t kGraphBytes = 512 * 1024;
constexpr size_t kFlagBytes = kPage + kGraphBytes;
constexpr size_t kWhereWord = kPage / sizeof(uint32_t);
constexpr size_t kSlotsWord = kWhereWord + 16;
constexpr size_t kSlotWords = kGraphBytes / sizeof(uint32_t) - 16;

void set_text(char* dst, size_t cap, const std::string& s) { std::snprintf(dst, cap, "%s", s.c_str()); }

const char* missing_entry(const exec::cuda::Api& d) {
  if (d.mem_alloc == nullptr) return "cuMemAlloc";
  if (d.mem_free == nullptr) return "cuMemFree";
  if (d.ipc_get_handle == nullptr) return "cuIpcGetMemHandle";
  if (d.ipc_open_handle == nullptr) return "cuIpcOpenMemHandle";
  if (d.ipc_close_handle == nullptr) return "cuIpcCloseMemHandle";
  if (d.host_register == nullptr) return "cuMemHostRegister";
  if (d.host_unregister == nullptr) return "cuMemHostUnregister";
  if (d.pci_bus_id == nullptr) return "cuDeviceGetPCIBusId";
  if (d.device_by_pci_bus_id == nullptr) return "cuDeviceGetByPCIBusId";
  if (d.can_access_peer == nullptr) return "cuDeviceCanAccessPeer";
  return nullptr;
}

}  // namespace

void Group::prepare(const exec::cuda::Api& d, const Options& o, Card* card) {
  d_ = &d;
  o_ = o;
  *card = Card{};
  card->host_hash = o.host_hash;
  card->pid = static_cast<int32_t>(getpid());
  auto refuse = [&](const std::string& why) { set_text(card->why_not, sizeof(card->why_not), why); };
  if (!o.disabled_by.empty()) return refuse(o.disabled_by);
  if (o.nranks > kMaxRanks) return refuse("more than " + std::to_string(kMaxRanks) + " ranks");
  if (const char* lacks = missing_entry(d)) return refuse(std::string("the CUDA driver lacks ") + lacks);
  if (!o.kernels_missing.empty()) return refuse(o.kernels_missing);
  if (d.ctx_get_device == nullptr || d.ctx_get_device(&card->device) != 0)
    return refuse("no CUDA context is current on the calling thread");
  if (d.pci_bus_id(card->bus_id, sizeof(card->bus_id), card->device) != 0) return refuse("cuDeviceGetPCIBusId failed");
  // Buffers of a multiple of 4 KiB, so that slices and pieces stay aligned.
  // A reduce-scatter round holds a 256-byte piece per rank at least.
  const size_t want = std::max<size_t>(o.buffer_bytes, static_cast<size_t>(o.nranks) * 256);
  buffer_bytes_ = std::max<size_t>(kPage, (want + kPage - 1) / kPage * kPage);
  peers_.assign(static_cast<size_t>(o.nranks), Peer{});
  Peer& me = peers_[static_cast<size_t>(o.rank)];
  exec::cuda::DevicePtr base = 0;
  if (o.host_buffers) {
    Status st = create_flag_page(2 * buffer_bytes_, &buffers_fd_);
    if (st.ok()) st = map_flag_page(d, buffers_fd_, 2 * buffer_bytes_, &me.host_buffers, &base);
    if (!st.ok()) return refuse("host buffers: " + st.message());
    card->buffers_fd = buffers_fd_;
  } else {
    int rc = d.mem_alloc(&base, 2 * buffer_bytes_);
    if (rc != 0)
      return refuse("cuMemAlloc of " + std::to_string(2 * buffer_bytes_) + " bytes: " + exec::cuda::error_text(rc));
    me.buffers = reinterpret_cast<unsigned char*>(base);  // freed by release() from here on
    rc = d.ipc_get_handle(&card->handle, base);
    if (rc != 0) return refuse("cuIpcGetMemHandle: " + exec::cuda::error_text(rc));
  }
  me.buffers = reinterpret_cast<unsigned char*>(base);
  Status st = create_flag_page(kFlagBytes, &memfd_);
  if (st.ok()) st = map_flag_page(d, memfd_, kFlagBytes, &me.flags, &me.flags_dev);
  if (!st.ok()) return refuse(st.message());
  card->flags_fd = memfd_;
  card->buffer_bytes = buffer_bytes_;
  card->ready = 1;
}

std::string Group::connect(const std::vector<Card>& cards) {
  const Card& mine = cards[static_cast<size_t>(o_.rank)];
  if (!mine.ready) return mine.why_not;
  for (int p = 0; p < o_.nranks; ++p) {
    const Card& c = cards[static_cast<size_t>(p)];
    const std::string who = "rank " + std::to_string(p);
    if (!c.ready) return who + ": " + c.why_not;
    if (c.host_hash != mine.host_hash) return who + " is on another host";
    if (c.buffer_bytes != buffer_bytes_) return who + " has other WEFT_P2P_BUFFER_BYTES";
    if (p == o_.rank) continue;
    Peer& peer = peers_[static_cast<size_t>(p)];
    if (o_.host_buffers) {
      exec::cuda::DevicePtr base = 0;
      Status st = map_peer_flag_page(*d_, c.pid, c.buffers_fd, 2 * buffer_bytes_, &peer.host_buffers, &base);
      if (!st.ok()) return who + "'s host buffers: " + st.message();
      peer.buffers = reinterpret_cast<unsigned char*>(base);
      st = map_peer_flag_page(*d_, c.pid, c.flags_fd, kFlagBytes, &peer.flags, &peer.flags_dev);
      if (!st.ok()) return who + ": " + st.message();
      continue;
    }
    if (std::strncmp(c.bus_id, mine.bus_id, sizeof(c.bus_id)) != 0) {
      if (o_.same_gpu_only) return who + "'s GPU " + c.bus_id + " is not this rank's (WEFT_P2P_LEVEL=LOC)";
      int dev = -1, can = 0;
      if (d_->device_by_pci_bus_id(&dev, c.bus_id) != 0) return who + "'s GPU " + c.bus_id + " is not visible here";
      if (d_->can_access_peer(&can, mine.device, dev) != 0 || can == 0)
        return who + "'s GPU " + c.bus_id + " cannot be accessed from " + mine.bus_id + " (cuDeviceCanAccessPeer)";
    }
    exec::cuda::DevicePtr base = 0;
    int rc = d_->ipc_open_handle(&base, c.handle, exec::cuda::kIpcLazyEnablePeerAccess);
    if (rc != 0) return who + "'s buffers: cuIpcOpenMemHandle: " + exec::cuda::error_text(rc);
    peer.buffers = reinterpret_cast<unsigned char*>(base);
    Status st = map_peer_flag_page(*d_, c.pid, c.flags_fd, kFlagBytes, &peer.flags, &peer.flags_dev);
    if (!st.ok()) return who + ": " + st.message();
  }
  // How: "4 ranks on GPU 0000:3b:00.0" or "4 ranks on 4 GPUs with peer access".
  std::vector<std::string> gpus;
  for (const Card& c : cards)
    if (std::find(gpus.begin(), gpus.end(), c.bus_id) == gpus.end()) gpus.emplace_back(c.bus_id);
  how_ = std::to_string(o_.nranks) + " ranks " +
         (gpus.size() == 1 ? "on GPU " + gpus[0]
                           : "on " + std::to_string(gpus.size()) +
                                 (o_.host_buffers ? " GPUs" : " GPUs with peer access"));
  if (o_.host_buffers) how_ += ", buffers in pinned host memory";
  return "";
}

void Group::settle(bool ok) {
  if (ok) {
    watchdog_ = std::make_unique<Watchdog>(peers_[static_cast<size_t>(o_.rank)].flags + kDoneWord, o_.timeout_ms,
                                           o_.on_timeout);
    active_.store(true, std::memory_order_release);
    return;
  }
  release();
}

void Group::release() {
  if (d_ == nullptr) return;
  for (const Mapping& m : mappings_) d_->ipc_close_handle(m.base);
  mappings_.clear();
  {
    std::lock_guard<std::mutex> lock(windows_mu_);
    windows_.clear();
  }
  for (size_t p = 0; p < peers_.size(); ++p) {
    Peer& peer = peers_[p];
    unmap_flag_page(*d_, peer.flags, kFlagBytes);
    if (o_.host_buffers) unmap_flag_page(*d_, peer.host_buffers, 2 * buffer_bytes_);
    else if (peer.buffers != nullptr) {
      if (static_cast<int>(p) == o_.rank) d_->mem_free(dptr(peer.buffers));
      else d_->ipc_close_handle(dptr(peer.buffers));
    }
    peer = Peer{};
  }
  peers_.clear();
  if (memfd_ >= 0) close(memfd_);
  if (buffers_fd_ >= 0) close(buffers_fd_);
  memfd_ = buffers_fd_ = -1;
  active_.store(false, std::memory_order_release);
}

Group::~Group() {
  if (!active()) {
    release();
    return;
  }
  stop_watchdog();
  // Every rank's stream must be past its last call before a buffer or page it
  // reads goes.
  if (broken_ || !streams_finished(Deadline::after_ms(o_.timeout_ms))) {
    WEFT_WARN(INIT, "cuda_p2p: a rank's stream has not finished its last call after %lld ms (or a call failed part-way): "
              "this rank's %zu bytes of device buffers and the peers' mappings stay", static_cast<long long>(o_.timeout_ms),
              2 * buffer_bytes_);
    return;
  }
  release();
}

// The done words count barriers, the same number everywhere.
bool Group::streams_finished(Deadline deadline) const {
  SpinWait wait;
  for (const Peer& peer : peers_)
    while (static_cast<int32_t>(load_flag(peer.flags + kDoneWord) - phase_.load()) < 0) {
      if (deadline.expired()) return false;
      wait.pause();
    }
  return true;
}

void Group::stop_watchdog() {
  if (watchdog_ != nullptr) watchdog_->stop();
  graph_stop_.store(true);
  if (graph_watcher_.joinable()) graph_watcher_.join();
}

void Group::unblock() {
  if (!active()) return;
  // Far ahead of any barrier enqueued so far (the waits compare cyclically).
  const uint32_t ahead = phase_.load(std::memory_order_relaxed) + (1u << 30);
  uint32_t* own = peers_[static_cast<size_t>(o_.rank)].flags;
  for (int p = 0; p < o_.nranks; ++p)
    if (p != o_.rank) store_flag(own + p, ahead);
  graph_release_.store(true);
}

// Which ranks the stream waits for: those that have not yet written the call's
// first barrier into this rank's page; none: this rank's own stream has not
// reached the call (work queued before it on the stream).
std::string Group::stuck_at(uint32_t first_barrier) const {
  const uint32_t* own = peers_[static_cast<size_t>(o_.rank)].flags;
  std::string late;
  for (int p = 0; p < o_.nranks; ++p)
    if (p != o_.rank && static_cast<int32_t>(load_flag(own + p) - first_barrier) < 0)
      late += (late.empty() ? "" : ", ") + std::to_string(p);
  const bool reached = static_cast<int32_t>(load_flag(own + o_.rank) - first_barrier) >= 0;
  if (!reached) return "this rank's stream has not reached it (work before it on the stream has not finished)";
  return late.empty() ? "its stream is past the barrier but has not finished the call"
                      : "its stream waits at a barrier for rank(s) " + late + ", which have not reached the call";
}

Status Group::step(int rc, exec::cuda::Stream s, const char* doing) {
  if (rc == 0) return Status::Ok();
  broken_ = true;
  return Error(weftUnhandledCudaError, "cuda_p2p on stream %p: %s: %s", s, doing, exec::cuda::error_text(rc).c_str());
}

Status Group::copy(void* dst, const void* src, size_t bytes, exec::cuda::Stream s) {
  if (bytes == 0 || dst == src) return Status::Ok();
  // Into this rank's own buffer: the input; else out of a buffer (or the root's input): the result.
  const bool input = dst >= buffer(o_.rank, 0) && dst < buffer(o_.rank, 0) + 2 * buffer_bytes_;
  return step(d_->copy_async(dptr(dst), dptr(src), bytes, s), s,
              input ? "copying the input into its buffer" : "copying the result");
}

// Every stream writes the barrier's number into each peer's page (its own word
// there), then waits until each peer has written it into this rank's page. The
// write orders after the stream's earlier work, memory included (the default
// flags of cuStreamWriteValue32).
Status Group::barrier(exec::cuda::Stream s) {
  if (capturing_) return graph_barrier(s);
  const uint32_t n = phase_.fetch_add(1, std::memory_order_relaxed) + 1;
  // Into this rank's word of every page, its own included: there nobody waits, and
  // unblock() leaves it, so it tells the watchdog how far this rank's stream got.
  for (int p = 0; p < o_.nranks; ++p)
    WEFT_TRY(step(d_->write_value32(s, peers_[static_cast<size_t>(p)].flags_dev + o_.rank * sizeof(uint32_t), n, 0),
                  s, "signalling a barrier"));
  const exec::cuda::DevicePtr own = peers_[static_cast<size_t>(o_.rank)].flags_dev;
  for (int p = 0; p < o_.nranks; ++p)
    if (p != o_.rank)
      WEFT_TRY(step(d_->wait_value32(s, own + p * sizeof(uint32_t), n, exec::cuda::kWaitValueGeq), s,
                    "waiting at a barrier"));
  return Status::Ok();
}

Status Group::graph_barrier(exec::cuda::Stream s) {
  const size_t n = static_cast<size_t>(o_.nranks), me = static_cast<size_t>(o_.rank);
  if (graph_slots_ >= kSlotWords / n)
    return Error(weftInvalidUsage, "cuda_p2p on stream %p: the calls captured into CUDA graphs on this communicator "
                 "have used all %zu graph barriers a flag page holds at %zu ranks", s, kSlotWords / n, n);
  const uint32_t j = graph_slots_++;
  auto slot = [&](size_t owner, size_t from) {
    return peers_[owner].flags_dev + (kSlotsWord + j * n + from) * sizeof(uint32_t);
  };
  const exec::cuda::DevicePtr where = peers_[me].flags_dev + kWhereWord * sizeof(uint32_t);
  WEFT_TRY(step(d_->write_value32(s, where, 2 * j + 2, 0), s, "signalling a graph barrier"));
  for (size_t p = 0; p < n; ++p)
    if (p != me) WEFT_TRY(step(d_->write_value32(s, slot(p, me), 1, 0), s, "signalling a graph barrier"));
  for (size_t p = 0; p < n; ++p)
    if (p != me)
      WEFT_TRY(step(d_->wait_value32(s, slot(me, p), 1, exec::cuda::kWaitValueGeq), s, "waiting at a graph barrier"));
  for (size_t p = 0; p < n; ++p)
    if (p != me) WEFT_TRY(step(d_->write_value32(s, slot(me, p), 0, 0), s, "resetting a graph barrier"));
  return step(d_->write_value32(s, where, 2 * j + 3, 0), s, "leaving a graph barrier");
}

// Polls this rank's where word: a wait at one graph barrier longer than the
// deadline fails the communicator naming the ranks it waits for; once the
// communicator failed, each wait is released (the replay runs on, its results
// void, rather than hold the stream forever).
void Group::watch_graphs() {
  const size_t n = static_cast<size_t>(o_.nranks), me = static_cast<size_t>(o_.rank);
  uint32_t* own = peers_[me].flags;
  uint32_t last = load_flag(own + kWhereWord);
  auto since = std::chrono::steady_clock::now();
  bool reported = false;
  while (!graph_stop_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const uint32_t w = load_flag(own + kWhereWord);
    const auto now = std::chrono::steady_clock::now();
    if (w != last) {
      last = w;
      since = now;
      reported = false;
    }
    if (w == 0 || w % 2 == 1) continue;
    const size_t j = w / 2 - 1;
    if (graph_release_.load()) {
      for (size_t p = 0; p < n; ++p)
        if (p != me) store_flag(own + kSlotsWord + j * n + p, 1);
      continue;
    }
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - since).count();
    if (reported || waited < o_.timeout_ms) continue;
    reported = true;
    std::string late;
    for (size_t p = 0; p < n; ++p)
      if (p != me && load_flag(own + kSlotsWord + j * n + p) == 0)
        late += (late.empty() ? "" : ", ") + std::to_string(p);
    o_.on_timeout(Error(weftTimeout, "cuda_p2p: a call captured into a CUDA graph has waited %lld ms (WEFT_TIMEOUT_MS) "
                        "at graph barrier %zu for rank(s) %s, which have not reached it", static_cast<long long>(waited),
                        j, late.empty() ? "(none: they arrived just now)" : late.c_str()));
  }
}

Status Group::call(const char* what, exec::cuda::Stream s, const std::function<Status()>& body, bool captured) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) return Error(weftInternalError, "cuda_p2p: an earlier call failed part-way on this communicator");
  if (captured) {
    if (!graph_watcher_.joinable()) graph_watcher_ = std::thread([this] { watch_graphs(); });
    // The barrier before: every peer has finished the calls before (an eager
    // call's last reads of the buffers have no barrier after them); after:
    // nobody writes the buffers again before every peer has finished this one.
    capturing_ = true;
    Status st = barrier(s);
    if (st.ok()) st = body();
    if (st.ok()) st = barrier(s);
    capturing_ = false;
    if (!st.ok()) broken_ = true;
    return st;
  }
  const uint32_t first_barrier = phase_.load(std::memory_order_relaxed) + 1;
  Status st = body();
  if (!st.ok()) {
    broken_ = true;
    return st;
  }
  // Done with every peer's memory for this call (read by the watchdog and at destroy).
  const uint32_t done = phase_.load(std::memory_order_relaxed);
  WEFT_TRY(step(d_->write_value32(s, peers_[static_cast<size_t>(o_.rank)].flags_dev + kDoneWord * sizeof(uint32_t),
                                  done, 0),
                s, "marking the call done"));
  watchdog_->add(what, s, done, [this, first_barrier] { return stuck_at(first_barrier); });
  return Status::Ok();
}

}  // namespace weft::transport::cuda_p2p
