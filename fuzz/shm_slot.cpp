// The shared-memory transport's receive path: the peer's process writes slot
// headers and payloads into a FIFO in our segment, which we trust no further than
// their bounds. Here the input is the peer: it fills the slots (header line,
// payload) of a small channel one after another, for the context that receives
// or another one, and a receive of a size and tag the input picks polls them,
// straight into a buffer or through a consumer. Rendezvous descriptors point into
// this process (process_vm_readv of our own pid). Malformed slots must end in an
// error, never in a read past a slot or a write past the message.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transports/shm/peer_channel.h"

#include "sink.h"

using namespace weft;

namespace {

struct Channel {
  explicit Channel(shm::ChannelLayout l) : mem(static_cast<unsigned char*>(std::aligned_alloc(4096, round(l.bytes())))) {
    std::memset(mem, 0, round(l.bytes()));
    view = shm::ChannelView(mem, l);
  }
  ~Channel() { std::free(mem); }
  static size_t round(size_t n) { return (n + 4095) / 4096 * 4096; }
  unsigned char* mem;
  shm::ChannelView view;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  const shm::ChannelLayout layout{128, 4};
  Channel out(layout), in(layout);
  shm::LinkOptions opts;
  shm::PeerChannel ch(getpid(), out.view, in.view, opts);
  const uint32_t ctx = ch.open_in();
  if (data[0] & 1) ch.open_in();  // a second context, whose slots are moved aside
  const size_t bytes = (static_cast<size_t>(data[1]) << 8 | data[2]) % 2048;
  const uint64_t tag = data[3];
  const bool consumer = data[0] & 2;
  data += 8;
  size -= 8;
  fuzz::Receive rx(bytes, tag, consumer);
  // Each slot: the header line's fields after seq, then the payload, as the input has them.
  const size_t record = shm::kCacheLine - sizeof(uint64_t) + layout.slot_bytes;
  bool complete = false;
  for (uint64_t n = 0; size >= record && !complete; ++n, data += record, size -= record) {
    // Slot n is free once the receiver has taken the slots a FIFO's length before it.
    if (n >= layout.nslots && in.view.head->value.load() + layout.nslots <= n) break;
    shm::SlotHeader* h = in.view.header(n);
    std::memcpy(reinterpret_cast<unsigned char*>(h) + sizeof(uint64_t), data, shm::kCacheLine - sizeof(uint64_t));
    std::memcpy(in.view.payload(n), data + shm::kCacheLine - sizeof(uint64_t), layout.slot_bytes);
    h->seq.store(n + 1, std::memory_order_release);
    if (!ch.poll_recv(ctx, rx.op, &complete, 1).ok()) break;
  }
  return 0;
}
