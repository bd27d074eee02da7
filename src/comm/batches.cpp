#include "comm/batches.h"

#include <algorithm>
#include <cstdint>

#include "comm/communicator.h"
#include "reduce/reduce.h"

namespace weft {
namespace {

unsigned char* at(const void* base, size_t byte_offset) {
  return static_cast<unsigned char*>(const_cast<void*>(base)) + byte_offset;
}

bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

Status check_dtype(const char* fn, weftDataType_t dtype) {
  if (static_cast<int>(dtype) < 0 || dtype >= weftNumTypes)
    return Error(weftInvalidArgument, "%s: invalid datatype %d", fn, static_cast<int>(dtype));
  return Status::Ok();
}

}  // namespace

Status gather_batch(const char* fn, bool gather, const void* sendbuff, void* recvbuff, size_t count,
                    weftDataType_t dtype, int root, int rank, int nranks, P2PBatch* out) {
  out->ops.clear();
  out->copies.clear();
  WEFT_TRY(check_dtype(fn, dtype));
  if (root < 0 || root >= nranks)
    return Error(weftInvalidArgument, "%s: root %d is out of range [0, %d)", fn, root, nranks);
  size_t bytes, total;
  if (__builtin_mul_overflow(count, reduce::dtype_size(dtype), &bytes) ||
      __builtin_mul_overflow(bytes, static_cast<size_t>(nranks), &total))
    return Error(weftInvalidArgument, "%s: count %zu of %s overflows the address space", fn, count,
                 reduce::dtype_name(dtype));
  if (count == 0) return Status::Ok();
  // Every rank's one block, and the root's nranks blocks.
  const void* block = gather ? sendbuff : recvbuff;
  const void* blocks = gather ? recvbuff : sendbuff;
  const char* block_name = gather ? "sendbuff" : "recvbuff";
  const char* blocks_name = gather ? "recvbuff" : "sendbuff";
  if (block == nullptr) return Error(weftInvalidArgument, "%s: %s is NULL with count %zu", fn, block_name, count);
  WEFT_TRY(check_memory(fn, block_name, block, out->on_stream));
  if (rank != root) {
    out->ops.push_back({gather, root, at(block, 0), bytes});
    return Status::Ok();
  }
  if (blocks == nullptr)
    return Error(weftInvalidArgument, "%s: %s is NULL at the root with count %zu", fn, blocks_name, count);
  WEFT_TRY(check_memory(fn, blocks_name, blocks, out->on_stream));
  unsigned char* own = at(blocks, static_cast<size_t>(rank) * bytes);
  if (overlaps(block, bytes, blocks, total) && block != own)
    return Error(weftInvalidArgument,
                 "%s: sendbuff and recvbuff overlap but are not in the in-place position (%s)", fn,
                 gather ? "sendbuff == recvbuff + root * count" : "recvbuff == sendbuff + root * count");
  for (int r = 0; r < nranks; ++r)
    if (r != rank) out->ops.push_back({!gather, r, at(blocks, static_cast<size_t>(r) * bytes), bytes});
  if (block != own) out->copies.push_back(gather ? exec::LocalCopy{own, block, bytes} : exec::LocalCopy{at(block, 0), own, bytes});
  return Status::Ok();
}

Status alltoallv_batch(const char* fn, const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                       void* recvbuff, const size_t* recvcounts, const size_t* rdispls, weftDataType_t dtype,
                       int rank, int nranks, P2PBatch* out) {
  out->ops.clear();
  out->copies.clear();
  WEFT_TRY(check_dtype(fn, dtype));
  if (sendcounts == nullptr || sdispls == nullptr || recvcounts == nullptr || rdispls == nullptr)
    return Error(weftInvalidArgument, "%s: sendcounts, sdispls, recvcounts and rdispls must not be NULL", fn);
  const size_t esize = reduce::dtype_size(dtype);
  // Each side's parts, checked and measured: [lo, hi) bytes spans its nonzero parts.
  struct Side {
    const char *buf_name, *counts_name, *displs_name;
    const void* buf;
    const size_t* counts;
    const size_t* displs;
    size_t lo, hi;
  } sides[2] = {{"sendbuff", "sendcounts", "sdispls", sendbuff, sendcounts, sdispls, SIZE_MAX, 0},
                {"recvbuff", "recvcounts", "rdispls", recvbuff, recvcounts, rdispls, SIZE_MAX, 0}};
  for (Side& s : sides) {
    for (int p = 0; p < nranks; ++p) {
      size_t end, end_bytes;
      if (__builtin_add_overflow(s.displs[p], s.counts[p], &end) || __builtin_mul_overflow(end, esize, &end_bytes))
        return Error(weftInvalidArgument, "%s: %s[%d] + %s[%d] = %zu + %zu elements of %s overflows the address space",
                     fn, s.displs_name, p, s.counts_name, p, s.displs[p], s.counts[p], reduce::dtype_name(dtype));
      if (s.counts[p] == 0) continue;
      if (s.buf == nullptr)
        return Error(weftInvalidArgument, "%s: %s is NULL with %s[%d] = %zu", fn, s.buf_name, s.counts_name, p,
                     s.counts[p]);
      s.lo = std::min(s.lo, s.displs[p] * esize);
      s.hi = std::max(s.hi, end_bytes);
    }
    if (s.hi > 0) WEFT_TRY(check_memory(fn, s.buf_name, s.buf, out->on_stream));
  }
  const Side &snd = sides[0], &rcv = sides[1];
  if (snd.hi > 0 && rcv.hi > 0 && overlaps(at(snd.buf, snd.lo), snd.hi - snd.lo, at(rcv.buf, rcv.lo), rcv.hi - rcv.lo))
    return Error(weftInvalidArgument, "%s: the parts of sendbuff and recvbuff overlap (all-to-all-v has no in-place "
                 "form)", fn);
  if (sendcounts[rank] != recvcounts[rank])
    return Error(weftInvalidArgument, "%s: this rank's part to itself differs in size: sendcounts[%d] = %zu, "
                 "recvcounts[%d] = %zu", fn, rank, sendcounts[rank], rank, recvcounts[rank]);
  for (int p = 0; p < nranks; ++p) {
    if (p == rank) continue;
    if (sendcounts[p] > 0) out->ops.push_back({true, p, at(sendbuff, sdispls[p] * esize), sendcounts[p] * esize});
    if (recvcounts[p] > 0) out->ops.push_back({false, p, at(recvbuff, rdispls[p] * esize), recvcounts[p] * esize});
  }
  if (sendcounts[rank] > 0)
    out->copies.push_back({at(recvbuff, rdispls[rank] * esize), at(sendbuff, sdispls[rank] * esize),
                           sendcounts[rank] * esize});
  return Status::Ok();
}

Status pair_self(const char* fn, int rank, std::vector<exec::P2P>* ops, std::vector<exec::LocalCopy>* copies) {
  std::vector<exec::P2P> sends, recvs;
  auto self = std::stable_partition(ops->begin(), ops->end(), [&](const exec::P2P& p) { return p.peer != rank; });
  for (auto it = self; it != ops->end(); ++it) (it->send ? sends : recvs).push_back(*it);
  ops->erase(self, ops->end());
  for (size_t k = 0; k < std::max(sends.size(), recvs.size()); ++k) {
    if (k >= sends.size() || k >= recvs.size())
      return Error(weftInvalidUsage, "%s: the group's %s %zu to this rank itself (rank %d) has no matching %s", fn,
                   k >= sends.size() ? "receive" : "send", k + 1, rank, k >= sends.size() ? "send" : "receive");
    const exec::P2P &s = sends[k], &r = recvs[k];
    if (s.bytes != r.bytes)
      return Error(weftInvalidUsage, "%s: the group's send %zu to this rank itself (rank %d) has %zu bytes, its "
                   "receive %zu", fn, k + 1, rank, s.bytes, r.bytes);
    if (overlaps(s.buf, s.bytes, r.buf, r.bytes) && s.buf != r.buf)
      return Error(weftInvalidArgument, "%s: the group's send %zu to this rank itself (rank %d) overlaps its receive "
                   "buffer", fn, k + 1, rank);
    if (s.bytes > 0 && s.buf != r.buf) copies->push_back({r.buf, s.buf, s.bytes});
  }
  return Status::Ok();
}

}  // namespace weft
