// weft-perf reducescatter: block r of the reduction of every rank's send buffer
// (nranks * count elements) lands in rank r's receive buffer (count elements). As
// in nccl-tests the size column is the whole send buffer and the count column is
// the call's recvcount. In place (NCCL's form): recvbuff == sendbuff + rank * count.
#include <cstdio>

#include "check.h"
#include "collective.h"
#include "datatype.h"

namespace weftperf {
namespace {

char* Block(void* base, int index, size_t count, weftDataType_t type) {
  return static_cast<char*>(base) + static_cast<size_t>(index) * count * Info(type).size;
}

class ReduceScatter final : public Collective {
 public:
  const char* Name() const override { return "reducescatter"; }
  bool HasOp() const override { return true; }
  size_t CountForBytes(size_t bytes, size_t type_size, int nranks) const override {
    return bytes / (static_cast<size_t>(nranks) * type_size);
  }
  size_t RowBytes(size_t count, size_t type_size, int nranks) const override {
    return count * static_cast<size_t>(nranks) * type_size;
  }
  // Each rank must send out the n-1 blocks it does not keep: (n-1)/n of the size.
  double BusFactor(int nranks) const override {
    return static_cast<double>(nranks - 1) / nranks;
  }

  // In place, the whole buffer (the send side) is b.recv, which holds max_bytes.
  weftResult_t Run(const Buffers& b, bool in_place, const RowSpec& row,
                   weftComm_t comm) const override {
    if (!in_place) return weftReduceScatter(b.send, b.recv, row.count, row.type, row.op, comm,
                                            b.stream);
    int rank = 0, nranks = 0;
    if (weftResult_t rc = RankAndCount(comm, &rank, &nranks); rc != weftSuccess) return rc;
    return weftReduceScatter(b.recv, Block(b.recv, rank, row.count, row.type), row.count,
                             row.type, row.op, comm, b.stream);
  }

  void FillInputs(const Buffers& b, bool in_place, const RowSpec& row, int rank,
                  int nranks) const override {
    // Element i of the full vector is pattern element i, so block `rank` of the
    // result is expected elements [rank * count, (rank + 1) * count).
    ReducePattern p(row.type, row.op, nranks);
    p.Fill(in_place ? b.recv : b.send, row.count * static_cast<size_t>(nranks), rank);
    if (!in_place) p.Poison(b.recv, row.count, static_cast<size_t>(rank) * row.count);
  }

  int64_t CountWrong(const Buffers& b, bool in_place, const RowSpec& row, int rank,
                     int nranks) const override {
    const void* out = in_place ? Block(b.recv, rank, row.count, row.type) : b.recv;
    return ReducePattern(row.type, row.op, nranks)
        .CountWrong(out, row.count, static_cast<size_t>(rank) * row.count);
  }

  std::string Describe(const RowSpec& row, bool in_place) const override {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "weftReduceScatter(%s, recvcount %zu, %s, %s)",
                  in_place ? "in-place" : "out-of-place", row.count, Info(row.type).name,
                  OpName(row.op));
    return buf;
  }
};

}  // namespace

std::unique_ptr<Collective> MakeReduceScatter() { return std::make_unique<ReduceScatter>(); }

}  // namespace weftperf
