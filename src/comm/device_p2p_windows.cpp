// Collectives on symmetric windows over cuda_p2p. Every rank has mapped every
// other's windows (Group::add_window), so a call reads the peers' buffers
// where they are: nothing is copied into the group's buffers, and there are no
// rounds. A barrier first (every rank's input is ready), the reads, a barrier
// last (no peer still reads this rank's buffers when its stream goes on). A
// rank finds a peer's buffer at the offset of its own in its window:
// WEFT_WIN_COLL_SYMMETRIC's promise, as NCCL_WIN_COLL_SYMMETRIC's, is that
// every rank passes the same offsets.
//
// Memory traffic per rank for an all-reduce of S bytes (two-shot, n ranks):
// S read and S/n written by the reduction, 2 (n - 1) S / n by the gather; the
// buffered schedule (device_p2p.cpp) adds 2 S to copy the input in and reads
// the result back out of the buffers, about twice as much in all.
#include <algorithm>

#include "comm/device_p2p.h"

namespace weft {
namespace {

using transport::cuda_p2p::Group;

const unsigned char* bytes_at(const void* p, size_t offset) { return static_cast<const unsigned char*>(p) + offset; }
unsigned char* bytes_at(void* p, size_t offset) { return static_cast<unsigned char*>(p) + offset; }

bool overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

// dst = the op over every rank's copy of `mine` (count elements), this rank's first.
Status reduce_peers(Group& g, void* dst, const void* mine, size_t count, const CollArgs& c, exec::cuda::Stream s) {
  return p2p_reduce(g, dst, [&](int p) -> const void* { return g.peer_address(p, mine); }, count, c, s);
}

// In place, or a one-shot whose output overlaps its input, needs the two-shot
// form: there each rank writes only the slice nobody else reads.
bool two_shot(const CollArgs& c, bool oneshot, size_t bytes) {
  return !oneshot || overlap(c.send, bytes, c.recv, bytes);
}

}  // namespace

namespace p2p_windows {

Status all_reduce(Group& g, const CollArgs& c, exec::cuda::Stream s, bool oneshot) {
  const size_t esize = reduce::dtype_size(c.dtype);
  if (!two_shot(c, oneshot, c.count * esize)) {
    WEFT_TRY(g.barrier(s));
    WEFT_TRY(reduce_peers(g, c.recv, c.send, c.count, c, s));
    return g.barrier(s);
  }
  // Slices of 256-byte multiples keep the kernels' 16-byte loads aligned.
  const size_t align = std::max<size_t>(1, 256 / esize), n = static_cast<size_t>(g.nranks());
  const size_t slice = ((c.count + n - 1) / n + align - 1) / align * align;
  auto lo = [&](int p) { return std::min(c.count, static_cast<size_t>(p) * slice); };
  auto len = [&](int p) { return std::min(c.count, lo(p) + slice) - lo(p); };
  const int me = g.rank();
  WEFT_TRY(g.barrier(s));
  if (len(me) > 0) WEFT_TRY(reduce_peers(g, bytes_at(c.recv, lo(me) * esize), bytes_at(c.send, lo(me) * esize), len(me), c, s));
  WEFT_TRY(g.barrier(s));
  for (int p = 0; p < g.nranks(); ++p) {
    if (p == me || len(p) == 0) continue;
    unsigned char* mine = bytes_at(c.recv, lo(p) * esize);
    WEFT_TRY(g.copy(mine, g.peer_address(p, mine), len(p) * esize, s));
  }
  return g.barrier(s);
}

Status all_gather(Group& g, const CollArgs& c, exec::cuda::Stream s) {
  const size_t bytes = c.count * reduce::dtype_size(c.dtype);
  const bool in_place = c.send == bytes_at(c.recv, static_cast<size_t>(g.rank()) * bytes);
  WEFT_TRY(g.barrier(s));
  for (int p = 0; p < g.nranks(); ++p) {
    unsigned char* to = bytes_at(c.recv, static_cast<size_t>(p) * bytes);
    // Rank p's input: in place, its part of its output.
    const void* from = p == g.rank() ? c.send : g.peer_address(p, in_place ? to : c.send);
    if (from != to) WEFT_TRY(g.copy(to, from, bytes, s));
  }
  return g.barrier(s);
}

Status reduce_scatter(Group& g, const CollArgs& c, exec::cuda::Stream s) {
  const size_t bytes = c.count * reduce::dtype_size(c.dtype);
  WEFT_TRY(g.barrier(s));
  WEFT_TRY(reduce_peers(g, c.recv, bytes_at(c.send, static_cast<size_t>(g.rank()) * bytes), c.count, c, s));
  return g.barrier(s);
}

Status reduce_to_root(Group& g, const CollArgs& c, exec::cuda::Stream s) {
  WEFT_TRY(g.barrier(s));
  if (g.rank() == c.root) WEFT_TRY(reduce_peers(g, c.recv, c.send, c.count, c, s));
  return g.barrier(s);
}

// The root's output holds the data after the first barrier; the others copy it
// from there (only the root's input position means anything, as in NCCL).
Status broadcast(Group& g, const CollArgs& c, exec::cuda::Stream s) {
  const size_t bytes = c.count * reduce::dtype_size(c.dtype);
  if (g.rank() == c.root && c.send != c.recv) WEFT_TRY(g.copy(c.recv, c.send, bytes, s));
  WEFT_TRY(g.barrier(s));
  if (g.rank() != c.root) WEFT_TRY(g.copy(c.recv, g.peer_address(c.root, c.recv), bytes, s));
  return g.barrier(s);
}

Status all_to_all(Group& g, const CollArgs& c, exec::cuda::Stream s) {
  const size_t bytes = c.count * reduce::dtype_size(c.dtype), me = static_cast<size_t>(g.rank());
  WEFT_TRY(g.barrier(s));
  for (int p = 0; p < g.nranks(); ++p) {
    const unsigned char* mine = bytes_at(c.send, me * bytes);
    const void* from = p == g.rank() ? mine : g.peer_address(p, mine);
    WEFT_TRY(g.copy(bytes_at(c.recv, static_cast<size_t>(p) * bytes), from, bytes, s));
  }
  return g.barrier(s);
}

}  // namespace p2p_windows

WindowUse p2p_window_use(const Group& g, const CollArgs& c) {
  if (c.count == 0) return WindowUse::None;
  const size_t bytes = c.count * reduce::dtype_size(c.dtype), n = static_cast<size_t>(g.nranks());
  auto any_if = [](bool in) { return in ? WindowUse::Any : WindowUse::None; };
  switch (c.coll) {
    case sched::Coll::AllReduce:
      if (!g.in_window(c.send, bytes)) return WindowUse::None;
      if (overlap(c.send, bytes, c.recv, bytes)) return g.in_window(c.recv, bytes) ? WindowUse::TwoShot : WindowUse::None;
      return g.in_window(c.recv, bytes) ? WindowUse::Any : WindowUse::OneShot;
    case sched::Coll::AllGather:
      return any_if(c.send == bytes_at(c.recv, static_cast<size_t>(g.rank()) * bytes) ? g.in_window(c.recv, n * bytes)
                                                                                     : g.in_window(c.send, bytes));
    case sched::Coll::ReduceScatter: return any_if(g.in_window(c.send, n * bytes));
    case sched::Coll::Reduce: return any_if(g.in_window(c.send, bytes));
    case sched::Coll::Broadcast: return any_if(g.in_window(c.recv, bytes));
    case sched::Coll::AllToAll:
      return any_if(g.in_window(c.send, n * bytes) && !overlap(c.send, n * bytes, c.recv, n * bytes));
    default: return WindowUse::None;
  }
}

}  // namespace weft
