#include "comm/device_p2p.h"

#include <algorithm>
#include <vector>

#include "comm/device_kernels.h"

namespace weft {
namespace {

using transport::cuda_p2p::Group;

// dst = the op of every rank's buffer `which` at byte `offset`, this rank's first
// (dst may be that buffer's own range).
Status reduce_from_all(Group& g, void* dst, size_t offset, size_t count, const CollArgs& c, int which,
                       exec::cuda::Stream s) {
  return p2p_reduce(g, dst, [&](int p) -> const void* { return g.buffer(p, which) + offset; }, count, c, s);
}

// Rounds over each block's elements: a round copies its elements of the
// `in_blocks` blocks of `count` at `in` into the rank's buffer (block b at b * m),
// and after the barrier, for every group rank p and j < takes, block j * n + p of
// `out` gets piece piece(j) of p's buffer. `in` may be `out`: a round reads its
// elements of `in` before it writes them.
template <class Piece>
Status regroup(Group& g, const unsigned char* in, unsigned char* out, size_t count, weftDataType_t dtype,
               size_t in_blocks, size_t takes, Piece piece, exec::cuda::Stream s) {
  const size_t esize = reduce::dtype_size(dtype), n = static_cast<size_t>(g.nranks());
  const size_t per = std::max<size_t>(1, g.buffer_bytes() / esize / in_blocks);
  for (size_t first = 0; first < count; first += per) {
    const size_t m = std::min(per, count - first);
    const int which = g.next_buffer();
    for (size_t b = 0; b < in_blocks; ++b)
      WEFT_TRY(g.copy(g.buffer(g.rank(), which) + b * m * esize, in + (b * count + first) * esize, m * esize, s));
    WEFT_TRY(g.barrier(s));
    for (size_t p = 0; p < n; ++p)
      for (size_t j = 0; j < takes; ++j)
        WEFT_TRY(g.copy(out + ((j * n + p) * count + first) * esize,
                        g.buffer(static_cast<int>(p), which) + piece(j) * m * esize, m * esize, s));
  }
  return Status::Ok();
}

// Rounds of up to one buffer. One-shot: every rank reduces the whole round from
// every buffer. Two-shot: rank r reduces slice r in place in its own buffer,
// and after a second barrier every rank copies each slice from its owner.
Status all_reduce(Group& g, const CollArgs& c, exec::cuda::Stream s, bool oneshot) {
  const size_t esize = reduce::dtype_size(c.dtype);
  const size_t per = g.buffer_bytes() / esize;
  oneshot = oneshot || g.nranks() == 1;
  const auto* in = static_cast<const unsigned char*>(c.send);
  auto* out = static_cast<unsigned char*>(c.recv);
  // Slices of 256-byte multiples keep the kernels' 16-byte loads aligned.
  const size_t align = std::max<size_t>(1, 256 / esize);
  for (size_t first = 0; first < c.count; first += per) {
    const size_t m = std::min(per, c.count - first);
    const int which = g.next_buffer();
    WEFT_TRY(g.copy(g.buffer(g.rank(), which), in + first * esize, m * esize, s));
    WEFT_TRY(g.barrier(s));
    if (oneshot) {
      WEFT_TRY(reduce_from_all(g, out + first * esize, 0, m, c, which, s));
      continue;
    }
    const size_t slice = ((m + g.nranks() - 1) / g.nranks() + align - 1) / align * align;
    auto lo = [&](int p) { return std::min(m, static_cast<size_t>(p) * slice); };
    auto hi = [&](int p) { return std::min(m, lo(p) + slice); };
    const size_t my_lo = lo(g.rank()), my_n = hi(g.rank()) - my_lo;
    WEFT_TRY(reduce_from_all(g, g.buffer(g.rank(), which) + my_lo * esize, my_lo * esize, my_n, c, which, s));
    WEFT_TRY(g.barrier(s));
    for (int p = 0; p < g.nranks(); ++p)
      WEFT_TRY(g.copy(out + (first + lo(p)) * esize, g.buffer(p, which) + lo(p) * esize, (hi(p) - lo(p)) * esize, s));
  }
  return Status::Ok();
}

// Each rank's piece in rounds of up to one buffer; everyone copies every piece.
Status all_gather(Group& g, const CollArgs& c, exec::cuda::Stream s) {
  const size_t bytes = c.count * reduce::dtype_size(c.dtype);
  const auto* in = static_cast<const unsigned char*>(c.send);
  auto* out = static_cast<unsigned char*>(c.recv);
  for (size_t at = 0; at < bytes; at += g.buffer_bytes()) {
    const size_t len = std::min(g.buffer_bytes(), bytes - at);
    const int which = g.next_buffer();
    WEFT_TRY(g.copy(g.buffer(g.rank(), which), in + at, len, s));
    WEFT_TRY(g.barrier(s));
    for (int p = 0; p < g.nranks(); ++p) {
      const void* from = p == g.rank() ? in + at : g.buffer(p, which);
      if (from != out + p * bytes + at) WEFT_TRY(g.copy(out + p * bytes + at, from, len, s));  // in place: there
    }
  }
  return Status::Ok();
}

// Rounds over the output's elements: each rank puts the n pieces of the round
// in its buffer, then reduces its own piece from every buffer.
Status reduce_scatter(Group& g, const CollArgs& c, exec::cuda::Stream s) {
  const size_t esize = reduce::dtype_size(c.dtype);
  const size_t align = std::max<size_t>(1, 256 / esize);
  const size_t per = std::max<size_t>(align, g.buffer_bytes() / esize / g.nranks() / align * align);
  const auto* in = static_cast<const unsigned char*>(c.send);
  auto* out = static_cast<unsigned char*>(c.recv);
  for (size_t first = 0; first < c.count; first += per) {
    const size_t m = std::min(per, c.count - first);
    const int which = g.next_buffer();
    for (int p = 0; p < g.nranks(); ++p)
      WEFT_TRY(g.copy(g.buffer(g.rank(), which) + p * m * esize, in + (p * c.count + first) * esize, m * esize, s));
    WEFT_TRY(g.barrier(s));
    WEFT_TRY(reduce_from_all(g, out + first * esize, g.rank() * m * esize, m, c, which, s));
  }
  return Status::Ok();
}

// Rounds over each block: each rank puts the round's piece of every block in its
// buffer, piece p at p * m, then copies piece `rank` out of every buffer.
Status all_to_all(Group& g, const CollArgs& c, exec::cuda::Stream s) {
  const size_t esize = reduce::dtype_size(c.dtype);
  const size_t n = static_cast<size_t>(g.nranks()), me = static_cast<size_t>(g.rank());
  const size_t per = std::max<size_t>(1, g.buffer_bytes() / esize / n);
  const auto* in = static_cast<const unsigned char*>(c.send);
  auto* out = static_cast<unsigned char*>(c.recv);
  for (size_t first = 0; first < c.count; first += per) {
    const size_t m = std::min(per, c.count - first);
    const int which = g.next_buffer();
    for (size_t p = 0; p < n; ++p)
      WEFT_TRY(g.copy(g.buffer(g.rank(), which) + p * m * esize, in + (p * c.count + first) * esize, m * esize, s));
    WEFT_TRY(g.barrier(s));
    for (size_t p = 0; p < n; ++p)
      WEFT_TRY(g.copy(out + (p * c.count + first) * esize, g.buffer(static_cast<int>(p), which) + me * m * esize,
                      m * esize, s));
  }
  return Status::Ok();
}

Status broadcast(Group& g, const CollArgs& c, exec::cuda::Stream s) {
  const size_t bytes = c.count * reduce::dtype_size(c.dtype);
  const auto* in = static_cast<const unsigned char*>(c.send);
  auto* out = static_cast<unsigned char*>(c.recv);
  const bool root = g.rank() == c.root;
  for (size_t at = 0; at < bytes; at += g.buffer_bytes()) {
    const size_t len = std::min(g.buffer_bytes(), bytes - at);
    const int which = g.next_buffer();
    if (root) WEFT_TRY(g.copy(g.buffer(g.rank(), which), in + at, len, s));
    WEFT_TRY(g.barrier(s));
    if (!root) WEFT_TRY(g.copy(out + at, g.buffer(c.root, which), len, s));
    else if (in != out) WEFT_TRY(g.copy(out + at, in + at, len, s));  // in place: already there
  }
  return Status::Ok();
}

Status reduce_to_root(Group& g, const CollArgs& c, exec::cuda::Stream s) {
  const size_t esize = reduce::dtype_size(c.dtype);
  const size_t per = g.buffer_bytes() / esize;
  const auto* in = static_cast<const unsigned char*>(c.send);
  auto* out = static_cast<unsigned char*>(c.recv);
  for (size_t first = 0; first < c.count; first += per) {
    const size_t m = std::min(per, c.count - first);
    const int which = g.next_buffer();
    WEFT_TRY(g.copy(g.buffer(g.rank(), which), in + first * esize, m * esize, s));
    WEFT_TRY(g.barrier(s));
    if (g.rank() == c.root) WEFT_TRY(reduce_from_all(g, out + first * esize, 0, m, c, which, s));
  }
  return Status::Ok();
}

}  // namespace

Status p2p_gather_by_host(Group& g, const void* in, void* out, size_t count, weftDataType_t dtype, int blocks,
                          exec::cuda::Stream s) {
  return g.call("allgather across hosts", s, [&]() -> Status {
    const auto nb = static_cast<size_t>(blocks);
    return regroup(g, static_cast<const unsigned char*>(in), static_cast<unsigned char*>(out), count, dtype, nb, nb,
                   [](size_t j) { return j; }, s);
  });
}

size_t p2p_round_elems(const Group& g, weftDataType_t dtype, int blocks_in) {
  const size_t esize = reduce::dtype_size(dtype), align = std::max<size_t>(1, 256 / esize);
  return std::max<size_t>(align, g.buffer_bytes() / esize / static_cast<size_t>(blocks_in) / align * align);
}

// The sums go into the buffer the round does not use: the peers finished reading
// it in the last round (they passed this round's barrier), and the next round
// writes it only after the stream has read the sums (stream order).
Status p2p_reduce_by_host(Group& g, const void* in, size_t count, weftDataType_t dtype, weftRedOp_t op, int blocks,
                          size_t first, size_t m, exec::cuda::Stream s, void** sums) {
  return g.call("reducescatter across hosts", s, [&]() -> Status {
    const size_t esize = reduce::dtype_size(dtype), n = static_cast<size_t>(g.nranks());
    const size_t me = static_cast<size_t>(g.rank()), all = n * static_cast<size_t>(blocks);
    const auto* src = static_cast<const unsigned char*>(in);
    const int which = g.next_buffer();
    for (size_t b = 0; b < all; ++b)
      WEFT_TRY(g.copy(g.buffer(g.rank(), which) + b * m * esize, src + (b * count + first) * esize, m * esize, s));
    WEFT_TRY(g.barrier(s));
    unsigned char* out = g.buffer(g.rank(), 1 - which);
    const CollArgs how{sched::Coll::ReduceScatter, nullptr, nullptr, m, dtype, op};
    for (size_t j = 0; j < static_cast<size_t>(blocks); ++j)
      WEFT_TRY(reduce_from_all(g, out + j * m * esize, (j * n + me) * m * esize, m, how, which, s));
    *sums = out;
    return Status::Ok();
  });
}

Status p2p_reduce_for_host(Group& g, const void* in, weftDataType_t dtype, weftRedOp_t op, int root, size_t first,
                           size_t m, exec::cuda::Stream s, void** sums) {
  return g.call("reduce across hosts", s, [&]() -> Status {
    const size_t esize = reduce::dtype_size(dtype);
    const int which = g.next_buffer();
    WEFT_TRY(g.copy(g.buffer(g.rank(), which), static_cast<const unsigned char*>(in) + first * esize, m * esize, s));
    WEFT_TRY(g.barrier(s));
    *sums = g.buffer(g.rank(), 1 - which);  // as p2p_reduce_by_host's
    if (g.rank() != root) return Status::Ok();
    return reduce_from_all(g, *sums, 0, m, CollArgs{sched::Coll::Reduce, nullptr, nullptr, m, dtype, op}, which, s);
  });
}

Status p2p_transpose_by_host(Group& g, void* buf, size_t count, weftDataType_t dtype, int blocks,
                             exec::cuda::Stream s) {
  return g.call("alltoall across hosts", s, [&]() -> Status {
    const size_t L = static_cast<size_t>(g.nranks()), me = static_cast<size_t>(g.rank());
    auto* data = static_cast<unsigned char*>(buf);
    const auto nb = static_cast<size_t>(blocks);
    return regroup(g, data, data, count, dtype, L * nb, nb, [&](size_t j) { return j * L + me; }, s);
  });
}

Status p2p_reduce(Group& g, void* dst, const std::function<const void*(int)>& at, size_t count, const CollArgs& c,
                  exec::cuda::Stream s) {
  std::vector<const void*> srcs;
  srcs.reserve(static_cast<size_t>(g.nranks()));
  srcs.push_back(at(g.rank()));
  for (int p = 0; p < g.nranks(); ++p)
    if (p != g.rank()) srcs.push_back(at(p));
  WEFT_TRY(reduce_on_stream(g.driver(), dst, srcs.data(), g.nranks(), count, c.dtype, reduce::elementwise_op(c.op), s));
  return c.op == weftAvg ? divide_on_stream(g.driver(), dst, count, c.dtype, g.nranks(), s) : Status::Ok();
}

bool p2p_serves(const CollArgs& a) {
  const bool coll = a.coll == sched::Coll::AllReduce || a.coll == sched::Coll::AllGather ||
                    a.coll == sched::Coll::ReduceScatter || a.coll == sched::Coll::Broadcast ||
                    a.coll == sched::Coll::Reduce || a.coll == sched::Coll::AllToAll;
  return coll && a.op < weftNumOps;  // pre-multiplied sums are staged
}

Status p2p_collective(Group& g, const CollArgs& c, exec::cuda::Stream s, bool oneshot, bool windows, bool captured) {
  return g.call(sched::coll_name(c.coll), s, [&]() -> Status {
    namespace w = p2p_windows;
    switch (c.coll) {
      case sched::Coll::AllReduce: return windows ? w::all_reduce(g, c, s, oneshot) : all_reduce(g, c, s, oneshot);
      case sched::Coll::AllGather: return windows ? w::all_gather(g, c, s) : all_gather(g, c, s);
      case sched::Coll::ReduceScatter: return windows ? w::reduce_scatter(g, c, s) : reduce_scatter(g, c, s);
      case sched::Coll::Broadcast: return windows ? w::broadcast(g, c, s) : broadcast(g, c, s);
      case sched::Coll::Reduce: return windows ? w::reduce_to_root(g, c, s) : reduce_to_root(g, c, s);
      case sched::Coll::AllToAll: return windows ? w::all_to_all(g, c, s) : all_to_all(g, c, s);
      default: return Error(weftInternalError, "cuda_p2p does not run %s", sched::coll_name(c.coll));
    }
  }, captured);
}

}  // namespace weft
