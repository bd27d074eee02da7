// Memory layout of one directed shared-memory channel (sender -> receiver), a
// FIFO of slots between two processes, shared by every communicator of a
// family (those split from one communicator) that connects them. Each slot
// names the receiver's context (one per communicator) it belongs to; the
// receiver's per-context counters say how many of that context's slots and
// rendezvous messages it has consumed. The receiver's counters sit on their
// own cache lines so that neither side writes a line the other polls except to
// hand it over.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace weft::shm {

constexpr size_t kCacheLine = 64;

enum SlotKind : uint32_t {
  kEager = 1,  // payload in the slot (inline when it fits the header line)
  kRndv = 2,   // payload is a RndvDescriptor: the receiver reads the data in place
};
// Bits beside the kind: the sender chose this slot's stores by timing
// (slot_copy.h), and whether it streamed them; the receiver times its read of
// such a slot and publishes the average in the channel's head line.
constexpr uint8_t kKindMask = 0x0f;
constexpr uint8_t kTimedStores = 0x10;
constexpr uint8_t kStreamedStores = 0x20;

// One cache line. For the smallest messages the flag (seq) and the payload
// travel in this single line.
struct alignas(kCacheLine) SlotHeader {
  std::atomic<uint64_t> seq;  // slot number + 1 once the slot is full
  uint64_t tag;
  uint64_t msg_bytes;         // size of the whole message this slot belongs to
  uint32_t bytes;             // payload bytes in this slot
  uint8_t kind;               // SlotKind | kTimedStores | kStreamedStores
  uint8_t gen;                // the context's generation: a reused context ignores old slots
  uint16_t ctx;               // the receiver's context (communicator) this slot is for
  unsigned char inline_data[32];
};
static_assert(sizeof(SlotHeader) == kCacheLine);
constexpr size_t kInlineBytes = sizeof(SlotHeader::inline_data);

// Where a large message lives in the sender's address space.
struct RndvDescriptor {
  uint64_t addr;         // sender's virtual address of the data
  uint64_t region_base;  // weftMemAlloc region holding it, or 0
  uint64_t region_size;
  uint64_t region_ino;   // identifies the region's memfd across fd reuse
  int32_t region_fd;     // the memfd in the sender, opened via /proc/<pid>/fd
  int32_t pad;
};

// The receiver's line: slots taken off the FIFO, and what reading timed slots
// costs it (ticks per byte x 65536; 0 = not measured yet), [cached, streamed].
struct alignas(kCacheLine) Head {
  std::atomic<uint64_t> value;
  std::atomic<uint32_t> read_cost[2];
};

// One context's counters, written by the receiver. A sender keeps at most a
// FIFO's worth of a context's slots unconsumed, so slots the receiver moves
// aside for a context that is not receiving yet stay bounded.
struct alignas(kCacheLine) ContextCounters {
  std::atomic<uint64_t> consumed;   // this context's slots consumed
  std::atomic<uint64_t> rndv_done;  // this context's rendezvous messages fully read
};
// Communicators of one family that connect the same two ranks at once.
constexpr size_t kMaxContexts = 1024;

// Channel = [head][slots...][contexts...]; each slot = header line + payload.
// The head and the first slots share a page, as a small message touches both;
// pages of the context table are touched only as contexts are used.
struct ChannelLayout {
  size_t slot_bytes;  // payload bytes per slot, a multiple of kCacheLine
  size_t nslots;

  size_t slot_stride() const { return kCacheLine + slot_bytes; }
  size_t contexts_offset() const { return kCacheLine + nslots * slot_stride(); }
  size_t bytes() const { return contexts_offset() + kMaxContexts * sizeof(ContextCounters); }
};

struct ChannelView {
  Head* head;                 // written by the receiver
  ContextCounters* contexts;  // kMaxContexts
  unsigned char* slots;
  ChannelLayout layout;

  ChannelView() = default;
  ChannelView(void* base, ChannelLayout l)
      : head(static_cast<Head*>(base)),
        contexts(reinterpret_cast<ContextCounters*>(static_cast<unsigned char*>(base) + l.contexts_offset())),
        slots(static_cast<unsigned char*>(base) + kCacheLine),
        layout(l) {}

  SlotHeader* header(uint64_t n) const {
    return reinterpret_cast<SlotHeader*>(slots + (n % layout.nslots) * layout.slot_stride());
  }
  unsigned char* payload(uint64_t n) const {
    return reinterpret_cast<unsigned char*>(header(n)) + kCacheLine;
  }
};

}  // namespace weft::shm
