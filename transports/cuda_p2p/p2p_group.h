// cuda_p2p: the ranks of one host whose GPUs can reach each other (the same GPU,
// or peer access over NVLink/PCIe) map each other's device memory and meet at
// barriers kept by their streams, with no host thread in the data path. The
// collectives built on it are in comm/device_p2p.cpp. Where the GPUs cannot
// reach each other, the same group can keep its buffers in pinned host memory
// the ranks share (Options::host_buffers; NCCL's SHM transport does the same).
//
// Each rank owns two device buffers that every peer maps (CUDA IPC) and a page
// of pinned host flags that every peer maps too. A call is stream work only: a
// body (Group::call) copies into the rank's own buffer, meets the peers at a
// barrier (each stream writes the barrier's number into every peer's flag page
// and waits until every peer has written its own: driver stream memory
// operations, no kernel spins), then reads the peers' buffers in place. A rank
// writes only its own buffer; the two buffers are used in turn, so a round's
// writes come after every peer has left the round before the last one (they
// passed the previous round's barrier).
//
// A call enqueued while its stream is captured into a CUDA graph cannot use
// those numbers: a replay repeats what was captured, and from the second replay
// on its waits would be met at once. Each of its barriers gets a slot of its
// own instead, a word per rank in every rank's page: a stream writes 1 into its
// word of the slot in each peer's page, waits for 1 from each peer in its own,
// and resets its own slot to 0 for the next replay. A peer cannot reach the
// slot again before this rank has reset it, for that needs this rank at the
// replay's next barrier, and every captured call has two or more: one before
// it and one after it besides its own, so that neither the calls around it nor
// the next replay need its buffers' turns. A graph watcher thread (from the
// first captured call) fails the communicator when a stream waits at such a
// barrier longer than the deadline, and once it failed releases the waits.
#pragma once

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/wait.h"
#include "exec/cuda_driver.h"
#include "transports/cuda_p2p/watchdog.h"

namespace weft::transport::cuda_p2p {

// Ranks a flag page has room for.
constexpr int kMaxRanks = 512;

// How a call's buffers lie in a group's symmetric windows: None, it goes
// through the buffers; Any, it runs on the windows; an all-reduce whose output
// is not in a window runs there OneShot only, one whose output overlaps its
// input (in place) TwoShot only.
enum class WindowUse { None, Any, OneShot, TwoShot };

// What a rank tells its peers (all-gathered as bytes).
struct Card {
  uint64_t host_hash = 0;
  int32_t pid = 0;
  int32_t flags_fd = -1;  // its flag page (a memfd the peers open through /proc)
  int32_t device = -1;    // its CUdevice
  int32_t ready = 0;      // 0: why_not says why it cannot take part
  uint64_t buffer_bytes = 0;
  char bus_id[32] = {};
  exec::cuda::IpcHandle handle{};  // its two buffers, one allocation (device buffers)
  int32_t buffers_fd = -1;         // its two buffers' memfd (host buffers)
  char why_not[108] = {};
};

class Group {
 public:
  struct Options {
    int rank = 0, nranks = 1;
    uint64_t host_hash = 0;
    size_t buffer_bytes = 0;
    bool same_gpu_only = false;   // WEFT_P2P_LEVEL=LOC
    // The buffers in pinned host memory the ranks share (a memfd each, as the
    // flag pages) instead of device memory: the ranks' GPUs need no peer access,
    // only one host; their kernels and copies read the peers' buffers over PCIe.
    bool host_buffers = false;
    std::string disabled_by;      // non-empty: this rank does not take part (WEFT_P2P_DISABLE=1)
    std::string kernels_missing;  // non-empty: the owner cannot enqueue device reductions, and why
    int64_t timeout_ms = 300000;  // a call's deadline from its enqueue; also how long destroy waits
    // Called (from the watchdog thread) when a call misses its deadline.
    std::function<void(const Status&)> on_timeout;
  };

  Group() = default;
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  // Waits (until the deadline) for every rank's stream to finish its last call,
  // then frees; memory a stream may still touch is left, with a warning.
  ~Group();

  // This rank's buffers and flag page, described in *card; card->ready 0 with
  // the reason where it cannot take part.
  void prepare(const exec::cuda::Api& d, const Options& o, Card* card);
  // Maps every peer's buffers and flags; "" when this rank can reach them all,
  // else why not. Every rank must then agree before the first call.
  std::string connect(const std::vector<Card>& cards);
  // The ranks agreed: calls go through the group from now on (ok; a watchdog
  // then fails a call its stream has not finished by the deadline), or it is
  // released and never used (!ok).
  void settle(bool ok);
  bool active() const { return active_.load(std::memory_order_acquire); }
  // The reason of the choice, for the INFO line.
  const std::string& how() const { return how_; }

  // One call: body enqueues its stream work with the primitives below (under
  // the group's lock); then the stream marks the call done for the watchdog. A
  // failed body leaves the stream out of step with the peers': the caller fails
  // the communicator, and the group refuses later calls.
  // `captured`: the stream is being captured into a CUDA graph.
  Status call(const char* what, exec::cuda::Stream s, const std::function<Status()>& body, bool captured = false);

  // The primitives of a call's body.
  int rank() const { return o_.rank; }
  int nranks() const { return o_.nranks; }
  const exec::cuda::Api& driver() const { return *d_; }
  size_t buffer_bytes() const { return buffer_bytes_; }
  // The buffer (0 or 1) of the next round.
  int next_buffer() { return static_cast<int>(round_++ % 2); }
  // A rank's buffer as mapped here (this rank's own: its allocation).
  unsigned char* buffer(int rank, int which) const { return peers_[rank].buffers + which * buffer_bytes_; }
  Status copy(void* dst, const void* src, size_t bytes, exec::cuda::Stream s);
  Status barrier(exec::cuda::Stream s);

  // Symmetric windows (weftCommWindowRegister of device memory): every rank's
  // range mapped here, so that calls on them read the peers' memory in place
  // instead of copying through the buffers. Collective: every rank calls it
  // with its own range, and `exchange` all-gathers `bytes` from each rank into
  // `all`. On return every rank keeps the window, or none does and *why_not
  // says why (the same on every rank).
  using Exchange = std::function<Status(const void* mine, void* all, size_t bytes)>;
  Status add_window(const void* base, size_t size, const Exchange& exchange, std::string* why_not);
  // Unmaps the window starting at base once every rank's stream has finished
  // the calls enqueued so far (they may read it); nothing if there is none.
  Status remove_window(const void* base);
  // Whether [p, p + bytes) lies within one window; then rank's copy of the
  // same place, as mapped here (this rank's: p).
  bool in_window(const void* p, size_t bytes) const;
  unsigned char* peer_address(int rank, const void* p) const;

  // The communicator failed: this rank's stream passes every barrier from now
  // on, so it never waits for a peer that will not come. Any thread.
  void unblock();
  // Stops the watchdog (no more on_timeout calls): first thing at the owner's
  // destruction, while what on_timeout touches still exists.
  void stop_watchdog();

 private:
  struct Peer {
    unsigned char* buffers = nullptr;  // its two buffers, mapped here (own: allocated), as the GPU addresses them
    uint32_t* host_buffers = nullptr;  // host buffers: their mapping in this process
    uint32_t* flags = nullptr;         // its flag page, mapped here
    exec::cuda::DevicePtr flags_dev = 0;
  };
  // A peer's allocation mapped here, for the windows in it.
  struct Mapping {
    int rank;
    exec::cuda::IpcHandle handle;
    exec::cuda::DevicePtr base;
    int windows;
  };
  struct Window {
    unsigned char* base;              // this rank's
    size_t size;
    std::vector<unsigned char*> at;   // by rank, as mapped here
    std::vector<exec::cuda::DevicePtr> mapping;  // by rank: the Mapping holding it (0: this rank's)
  };
  Status step(int rc, exec::cuda::Stream s, const char* doing);
  // Until every rank's stream has finished the calls enqueued so far, or the deadline.
  bool streams_finished(Deadline deadline) const;
  // A mapping of `rank`'s allocation `h` (shared by the windows in it), or why not.
  std::string map_allocation(int rank, const exec::cuda::IpcHandle& h, exec::cuda::DevicePtr* base);
  void unmap_allocation(int rank, exec::cuda::DevicePtr base);
  void release();
  // A barrier of a call captured into a graph: the next slot.
  Status graph_barrier(exec::cuda::Stream s);
  // The graph watcher's loop.
  void watch_graphs();
  // Why a call whose first barrier is `first_barrier` is not finished.
  std::string stuck_at(uint32_t first_barrier) const;

  const exec::cuda::Api* d_ = nullptr;
  Options o_;
  size_t buffer_bytes_ = 0;
  int memfd_ = -1;
  int buffers_fd_ = -1;  // host buffers
  std::vector<Peer> peers_;  // by rank; this rank's entry is its own memory
  std::atomic<bool> active_{false};
  bool broken_ = false;  // a call failed part-way: the streams may hold it forever
  std::string how_;
  std::mutex mu_;        // one call's enqueue at a time (the counters below)
  std::atomic<uint32_t> phase_{0};  // barriers enqueued so far (every rank counts the same); read by unblock()
  uint64_t round_ = 0;   // buffer uses so far (which buffer: round_ % 2)
  bool capturing_ = false;  // the call being enqueued is captured into a graph (under mu_)
  uint32_t graph_slots_ = 0;  // graph barriers captured so far (every rank counts the same; under mu_)
  std::thread graph_watcher_;  // from the first captured call
  std::atomic<bool> graph_stop_{false};
  std::atomic<bool> graph_release_{false};  // the communicator failed: the watcher releases the waits
  std::unique_ptr<Watchdog> watchdog_;  // once settled
  std::vector<Mapping> mappings_;       // guarded by mu_
  mutable std::mutex windows_mu_;       // lookups happen outside calls too
  std::vector<Window> windows_;         // changed under mu_ and windows_mu_
};

}  // namespace weft::transport::cuda_p2p
