// cuda_p2p point-to-point: sends and receives on device memory between ranks of
// one host whose GPUs reach each other, as stream work only (no host thread in
// the data path), for weftSend/weftRecv, their groups, gather, scatter and
// all-to-all-v.
//
// Each rank owns an area of device memory that its peers map (CUDA IPC): a
// region per peer it sends to, in two slots used in turn. It also owns a flag
// page (host memory shared through a memfd, registered for the GPU) in which
// each peer keeps two running byte totals: what it has posted to this rank
// (posted[peer]) and what it has taken of this rank's posts (taken[peer]).
//
// A call's sends to one peer, in the order given, are one stream of bytes, and
// so are its receives from one peer; each is cut into slot-sized chunks. Round
// r of a call: for each peer it sends to, the stream waits until that peer has
// taken the chunk that last used the slot, copies chunk r into it and writes
// the new total into the peer's posted word; then, for each peer it receives
// from, it waits until that peer's posted total covers chunk r, copies the
// chunk out of the peer's slot and writes its new taken total into the peer's
// page. A round waits only for posts of the same round and takes of two rounds
// back, so calls matched in order on both ranks cannot deadlock. Totals are
// 32-bit and compared cyclically, as the driver's waits do.
//
// A pair connects at its first call (route()), as NCCL's do: the two ranks swap
// what the other maps and agree whether the pair goes over cuda_p2p or is
// staged through host memory (other hosts, no peer access, WEFT_P2P_DISABLE).
// With Options::host_area every rank's area is pinned host memory the ranks
// share instead (a memfd, as the flag pages), and every pair on one host goes
// over cuda_p2p without peer access, the copies crossing PCIe.
// That blocks the calling thread until the peer's call with this rank.
//
// The sizes of a send and its receive are not compared here (NCCL does not
// either): a mismatch leaves a stream waiting, and the watchdog fails the
// call at WEFT_TIMEOUT_MS naming the peers it waits for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "exec/cuda_driver.h"
#include "transports/cuda_p2p/watchdog.h"

namespace weft::transport::cuda_p2p {

class Pairs {
 public:
  struct Options {
    int rank = 0, nranks = 1;
    std::vector<bool> same_host;  // by rank: shares memory with this one (others are staged, unasked)
    size_t buffer_bytes = 0;    // WEFT_P2P_BUFFER_BYTES: the area, split among the peers
    bool same_gpu_only = false;  // WEFT_P2P_LEVEL=LOC
    std::string disabled_by;     // non-empty: every pair is staged (WEFT_P2P_DISABLE=1 WEFT_SHM_DISABLE=1)
    bool host_area = false;      // the areas in pinned host memory (WEFT_P2P_DISABLE=1)
    int64_t timeout_ms = 300000;
    std::function<void(const Status&)> on_timeout;  // a call its stream has not finished by the deadline
  };
  // What a pair swaps, twice: each rank's card, then each rank's verdict on the
  // pair ("" yes, else why not). Both ranks call it with the same bytes.
  using Swap = std::function<Status(const void* mine, void* theirs, size_t bytes)>;
  struct Op {
    bool send;
    int peer;
    void* buf;
    size_t bytes;
  };
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };

  Pairs(const exec::cuda::Api& d, Options o);
  // Waits (until the deadline) for this rank's stream to finish its calls and
  // for its peers to take what it posted, then frees; memory a stream may still
  // touch is left, with a warning.
  ~Pairs();
  Pairs(const Pairs&) = delete;
  Pairs& operator=(const Pairs&) = delete;

  // Whether the pair with `peer` goes over cuda_p2p; at the first call with a
  // peer on this host it connects (both ranks call it, swapping through `swap`).
  Status route(int peer, const Swap& swap, bool* p2p);
  // One call, enqueued on the stream: copies within the rank, then the ops
  // (every peer routed over cuda_p2p). A failure leaves the stream out of step
  // with the peers': the caller fails the communicator, and later calls are refused.
  Status call(const std::vector<Op>& ops, const std::vector<Copy>& copies, exec::cuda::Stream s);

  // The communicator failed: this rank's stream passes every wait from now on.
  // Any thread.
  void unblock();
  void stop_watchdog();

 private:
  struct Card;
  struct Peer {
    enum class Route : uint8_t { Unknown, P2P, Staged } route = Route::Unknown;
    unsigned char* area = nullptr;  // its area, mapped here (as the GPU addresses it)
    uint32_t* area_host = nullptr;  // host_area: its mapping in this process
    uint32_t* flags = nullptr;      // its flag page, mapped here
    exec::cuda::DevicePtr flags_dev = 0;
    uint64_t posted = 0, taken = 0;         // running totals: this rank's posts to it, takes of its posts
    uint64_t posts = 0, takes = 0;          // chunks so far each way (their slot: the count's parity)
    uint64_t slot_end[2] = {0, 0};          // the posted total at the end of each slot's last chunk
  };
  // This rank's area and page, made at the first route(); "" or why not.
  std::string prepare();
  std::string connect(Peer& p, const Card& theirs);
  void stage(int peer, const char* why);
  Status step(int rc, exec::cuda::Stream s, const char* doing);
  std::string stuck(const std::vector<std::pair<int, uint64_t>>& waits_posted,
                    const std::vector<std::pair<int, uint64_t>>& waits_taken);
  uint32_t word(size_t i) const;

  const exec::cuda::Api& d_;
  Options o_;
  size_t region_ = 0;  // per peer, two slots
  bool prepared_ = false;
  std::string unusable_;  // why this rank cannot take part ("" if it can)
  unsigned char* area_ = nullptr;  // as the GPU addresses it
  uint32_t* area_host_ = nullptr;  // host_area: its mapping
  int area_fd_ = -1;               // host_area: its memfd
  uint32_t* flags_ = nullptr;
  exec::cuda::DevicePtr flags_dev_ = 0;
  int memfd_ = -1;
  std::vector<Peer> peers_;
  std::mutex mu_;  // one call's enqueue at a time, unblock() and stuck()
  // The posted and taken words as unblock() found them, before it overwrote
  // them: what a stuck call's explanation reads from then on (under mu_).
  std::vector<uint32_t> released_;
  bool broken_ = false;
  uint32_t calls_ = 0;  // calls enqueued (the done word counts them)
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace weft::transport::cuda_p2p
