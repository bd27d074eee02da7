// One reliable-connected queue pair between two ranks, shared by every
// communicator of a family (one made by init and those split from it) that
// links the two, as the family's TCP connections are. Each communicator is a
// context on it: an IbLink with its own receive ring, credits and staging
// headers. The queue pair carries all of them.
//
// Addressing. Every write carries an immediate naming the receiving side's
// context index (chosen by the receiver, sent to the peer with the ring), so
// completions are dispatched to their context; writes this side posts carry
// its own index in their wr_id. The layouts are below.
//
// Queue depth. A context may have at most 2 * slots + 1 writes in flight each
// way (data into the peer's ring, credits for its own, one close notice; the
// slot counts of both ends agree, WEFT_IB_SLOTS is an agreed setting), so a
// context reserves that much of the queue pair's depth, and its receives are
// posted, before its ring is announced. A queue pair without room refuses the
// context (the communicator then connects anew).
//
// Closing. A context that closes sends a close notice after its last write;
// its ring, staging headers and registrations stay (Remains) until the peer's
// notice for it has arrived and its own writes have completed. Only then is
// its index reused: a late credit or stray write of the peer can never land
// in freed memory or in another communicator's context.
//
// Thread-safe: the communicators of a family run on different threads. Each
// IbLink holds mu() for the whole of each of its calls; a completion polled
// by one context is handed to its owner under the same lock.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "transports/ibverbs/conn_info.h"
#include "transports/ibverbs/queue_pair.h"

namespace weft::ib {

class IbLink;
struct ContextMemory;

// The immediate: [31:30] kind, [29:20] the receiver's context index, [19:0] a
// count (data: the slot's sequence number; credit: the running total of freed
// slots; both lie within a ring's slots of what the receiver knows, so 20 bits
// place them).
enum class WriteKind : uint32_t { Data = 0, Credit = 1, Close = 2 };
inline constexpr int kContextBits = 10;
inline constexpr uint32_t kMaxContexts = 1u << kContextBits;
inline constexpr int kCountBits = 20;
inline constexpr uint32_t kCountMask = (1u << kCountBits) - 1;

inline uint32_t make_imm(WriteKind k, uint32_t context, uint64_t count) {
  return static_cast<uint32_t>(k) << 30 | context << kCountBits | static_cast<uint32_t>(count & kCountMask);
}
inline WriteKind imm_kind(uint32_t imm) { return static_cast<WriteKind>(imm >> 30); }
inline uint32_t imm_context(uint32_t imm) { return (imm >> kCountBits) & (kMaxContexts - 1); }

// A write's wr_id: [63:54] the poster's context index, [53:52] kind, [51:12]
// the send's ticket, [11:0] the staging header (a peer slot) it gathers from.
inline constexpr int kStagingBits = 12;
inline uint64_t make_wr(uint32_t context, WriteKind k, uint64_t ticket = 0, uint32_t staging = 0) {
  return uint64_t{context} << 54 | uint64_t{static_cast<uint32_t>(k)} << 52 |
         (ticket & ((uint64_t{1} << 40) - 1)) << kStagingBits | staging;
}
inline uint32_t wr_context(uint64_t wr) { return static_cast<uint32_t>(wr >> 54); }
inline WriteKind wr_kind(uint64_t wr) { return static_cast<WriteKind>((wr >> 52) & 3); }
inline uint64_t wr_ticket(uint64_t wr) { return (wr >> kStagingBits) & ((uint64_t{1} << 40) - 1); }
inline uint32_t wr_staging(uint64_t wr) { return static_cast<uint32_t>(wr & ((1u << kStagingBits) - 1)); }

class Connection {
 public:
  // `depth`: the work requests the queue pair holds on each side (send and
  // receive queues, and their completion queues); peer_name is shown in errors.
  Connection(std::unique_ptr<QueuePair> qp, std::string peer_name, uint32_t depth);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  QueuePair& queue_pair() { return *qp_; }
  const std::string& peer_name() const { return peer_name_; }
  std::mutex& mu() { return mu_; }

  // Set up by the transport: this side's queue pair address (a context's
  // connection info repeats it) and the peer's queue pair number (checked
  // against what a peer's context names).
  ConnInfo address;
  uint32_t peer_qpn = 0;

  // Contexts open, closed but not yet released (for tests).
  size_t open_contexts();
  size_t closed_contexts();

 private:
  friend class IbLink;
  struct Entry {
    enum class State : uint8_t { Free, Open, Closed } state = State::Free;
    IbLink* link = nullptr;                // Open
    std::unique_ptr<ContextMemory> memory;  // Closed: kept until released
    uint32_t budget = 0;                   // writes in flight each way, reserved
    uint32_t in_flight = 0;                // Closed: this side's writes not yet completed
    bool peer_closed = false;              // Closed: the peer's close notice arrived
  };

  // Callers hold mu_.
  // A free index with `budget` of the depth reserved and receives posted for it.
  Status open(IbLink* link, uint32_t budget, uint32_t* index);
  // The link's memory stays until the peer's close notice (unless it never
  // learnt of the context: `announced` false) and `in_flight` writes complete.
  void close(uint32_t index, std::unique_ptr<ContextMemory> memory, uint32_t in_flight, bool peer_closed,
             bool announced);
  // Polls every completion and hands each to its context.
  void drain();
  void on_completion(const Completion& c);
  void release_done();
  // The sticky failure of the queue pair, phrased for a link to peer `rank`.
  bool failed() const { return failed_; }
  Status fault(int rank) const;
  void fail(weftResult_t code, std::string before, std::string after);

  std::mutex mu_;
  std::unique_ptr<QueuePair> qp_;
  std::string peer_name_;
  uint32_t depth_;
  uint32_t reserved_ = 0;  // budgets of the contexts open or closed
  uint32_t posted_ = 0;    // receives posted (a completed one is posted again at once)
  std::vector<Entry> entries_;
  bool failed_ = false;
  weftResult_t fault_code_ = weftSuccess;
  std::string fault_before_, fault_after_;  // the message around "peer rank N (host)"
};

}  // namespace weft::ib
