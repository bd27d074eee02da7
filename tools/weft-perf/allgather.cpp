// weft-perf allgather: rank r's `count` elements land in block r of every rank's
// receive buffer. As in nccl-tests the size column is the whole receive buffer
// (nranks * count elements) and the count column is the call's per-rank count.
// In place (NCCL's form): sendbuff == recvbuff + rank * count elements.
#include <cstdio>

#include "check.h"
#include "collective.h"
#include "datatype.h"

namespace weftperf {
namespace {

char* Block(void* base, int index, size_t count, weftDataType_t type) {
  return static_cast<char*>(base) + static_cast<size_t>(index) * count * Info(type).size;
}

class AllGather final : public Collective {
 public:
  const char* Name() const override { return "allgather"; }
  bool HasOp() const override { return false; }
  size_t CountForBytes(size_t bytes, size_t type_size, int nranks) const override {
    return bytes / (static_cast<size_t>(nranks) * type_size);
  }
  size_t RowBytes(size_t count, size_t type_size, int nranks) const override {
    return count * static_cast<size_t>(nranks) * type_size;
  }
  // Each rank must receive the n-1 blocks it does not own: (n-1)/n of the size.
  double BusFactor(int nranks) const override {
    return static_cast<double>(nranks - 1) / nranks;
  }

  weftResult_t Run(const Buffers& b, bool in_place, const RowSpec& row,
                   weftComm_t comm) const override {
    const void* send = b.send;
    if (in_place) {
      int rank = 0, nranks = 0;
      if (weftResult_t rc = RankAndCount(comm, &rank, &nranks); rc != weftSuccess) return rc;
      send = Block(b.recv, rank, row.count, row.type);
    }
    return weftAllGather(send, b.recv, row.count, row.type, comm, b.stream);
  }

  void FillInputs(const Buffers& b, bool in_place, const RowSpec& row, int rank,
                  int nranks) const override {
    CopyPattern p(row.type);
    // Block r of the output must come from rank r; each starts as the complement
    // of that, so a block that is not written, or written from elsewhere, shows.
    for (int r = 0; r < nranks; ++r) p.Poison(Block(b.recv, r, row.count, row.type), row.count, r);
    p.Fill(in_place ? Block(b.recv, rank, row.count, row.type) : b.send, row.count, rank);
  }

  int64_t CountWrong(const Buffers& b, bool, const RowSpec& row, int,
                     int nranks) const override {
    CopyPattern p(row.type);
    int64_t wrong = 0;
    for (int r = 0; r < nranks; ++r)
      wrong += p.CountWrong(Block(b.recv, r, row.count, row.type), row.count, r);
    return wrong;
  }

  std::string Describe(const RowSpec& row, bool in_place) const override {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "weftAllGather(%s, sendcount %zu, %s)",
                  in_place ? "in-place" : "out-of-place", row.count, Info(row.type).name);
    return buf;
  }
};

}  // namespace

std::unique_ptr<Collective> MakeAllGather() { return std::make_unique<AllGather>(); }

}  // namespace weftperf
