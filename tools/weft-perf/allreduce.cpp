// weft-perf allreduce: every rank ends with the reduction of all ranks' buffers.
#include <cstdio>

#include "check.h"
#include "collective.h"
#include "datatype.h"

namespace weftperf {
namespace {

class AllReduce final : public Collective {
 public:
  const char* Name() const override { return "allreduce"; }
  bool HasOp() const override { return true; }
  size_t CountForBytes(size_t bytes, size_t type_size, int) const override {
    return bytes / type_size;
  }
  size_t RowBytes(size_t count, size_t type_size, int) const override {
    return count * type_size;
  }
  // Each rank sends and receives 2(n-1)/n of the buffer in a bandwidth-optimal
  // all-reduce (reduce-scatter then all-gather), as nccl-tests counts it.
  double BusFactor(int nranks) const override {
    return nranks > 1 ? 2.0 * (nranks - 1) / nranks : 0.0;
  }

  weftResult_t Run(const Buffers& b, bool in_place, const RowSpec& row,
                   weftComm_t comm) const override {
    const void* send = in_place ? b.recv : b.send;
    return weftAllReduce(send, b.recv, row.count, row.type, row.op, comm, b.stream);
  }

  void FillInputs(const Buffers& b, bool in_place, const RowSpec& row, int rank,
                  int nranks) const override {
    ReducePattern p(row.type, row.op, nranks);
    p.Fill(in_place ? b.recv : b.send, row.count, rank);
    // The timed runs left the right answer in recv; start it wrong.
    if (!in_place) p.Poison(b.recv, row.count);
  }

  int64_t CountWrong(const Buffers& b, bool, const RowSpec& row, int,
                     int nranks) const override {
    return ReducePattern(row.type, row.op, nranks).CountWrong(b.recv, row.count);
  }

  std::string Describe(const RowSpec& row, bool in_place) const override {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "weftAllReduce(%s, count %zu, %s, %s)",
                  in_place ? "in-place" : "out-of-place", row.count, Info(row.type).name,
                  OpName(row.op));
    return buf;
  }
};

}  // namespace

std::unique_ptr<Collective> MakeAllReduce() { return std::make_unique<AllReduce>(); }

}  // namespace weftperf
