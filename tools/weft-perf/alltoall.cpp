// weft-perf alltoall: block j of rank r's send buffer lands in block r of rank j's
// receive buffer (count elements per block). As in nccl-tests the size column is
// a whole buffer (nranks * count elements) and the count column is the call's
// per-peer count. NCCL defines no in-place all-to-all: those columns print N/A.
#include <cstdio>

#include "check.h"
#include "collective.h"
#include "datatype.h"

namespace weftperf {
namespace {

char* Block(void* base, int index, size_t count, weftDataType_t type) {
  return static_cast<char*>(base) + static_cast<size_t>(index) * count * Info(type).size;
}

class AlltoAll final : public Collective {
 public:
  const char* Name() const override { return "alltoall"; }
  bool HasOp() const override { return false; }
  bool HasInPlace() const override { return false; }
  size_t CountForBytes(size_t bytes, size_t type_size, int nranks) const override {
    return bytes / (static_cast<size_t>(nranks) * type_size);
  }
  size_t RowBytes(size_t count, size_t type_size, int nranks) const override {
    return count * static_cast<size_t>(nranks) * type_size;
  }
  // The block a rank sends to itself crosses no link: (n-1)/n of the size does.
  double BusFactor(int nranks) const override {
    return static_cast<double>(nranks - 1) / nranks;
  }

  weftResult_t Run(const Buffers& b, bool, const RowSpec& row, weftComm_t comm) const override {
    return weftAlltoAll(b.send, b.recv, row.count, row.type, comm, b.stream);
  }

  // Source r's element i is Raw(r, i) over its whole send buffer, so what rank j
  // receives from r is Raw(r, j * count + k): it depends on sender and receiver.
  void FillInputs(const Buffers& b, bool, const RowSpec& row, int rank,
                  int nranks) const override {
    CopyPattern p(row.type);
    p.Fill(b.send, row.count * static_cast<size_t>(nranks), rank);
    for (int r = 0; r < nranks; ++r)
      p.Poison(Block(b.recv, r, row.count, row.type), row.count, r,
               static_cast<size_t>(rank) * row.count);
  }

  int64_t CountWrong(const Buffers& b, bool, const RowSpec& row, int rank,
                     int nranks) const override {
    CopyPattern p(row.type);
    int64_t wrong = 0;
    for (int r = 0; r < nranks; ++r)
      wrong += p.CountWrong(Block(b.recv, r, row.count, row.type), row.count, r,
                            static_cast<size_t>(rank) * row.count);
    return wrong;
  }

  std::string Describe(const RowSpec& row, bool) const override {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "weftAlltoAll(count %zu, %s)", row.count,
                  Info(row.type).name);
    return buf;
  }
};

}  // namespace

std::unique_ptr<Collective> MakeAlltoAll() { return std::make_unique<AlltoAll>(); }

}  // namespace weftperf
