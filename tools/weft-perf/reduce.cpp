// weft-perf reduce: the root's receive buffer ends up with the reduction of every
// rank's send buffer. In place (NCCL's form) means sendbuff == recvbuff. Only the
// root's output is defined, so only the root's is checked.
#include <cstdio>

#include "check.h"
#include "collective.h"
#include "datatype.h"

namespace weftperf {
namespace {

class Reduce final : public Collective {
 public:
  const char* Name() const override { return "reduce"; }
  bool HasOp() const override { return true; }
  bool HasRoot() const override { return true; }
  size_t CountForBytes(size_t bytes, size_t type_size, int) const override {
    return bytes / type_size;
  }
  size_t RowBytes(size_t count, size_t type_size, int) const override {
    return count * type_size;
  }
  // nccl-tests' factor: a pipelined reduce moves the buffer once over every link.
  double BusFactor(int) const override { return 1.0; }

  weftResult_t Run(const Buffers& b, bool in_place, const RowSpec& row,
                   weftComm_t comm) const override {
    const void* send = in_place ? b.recv : b.send;
    return weftReduce(send, b.recv, row.count, row.type, row.op, row.root, comm, b.stream);
  }

  void FillInputs(const Buffers& b, bool in_place, const RowSpec& row, int rank,
                  int nranks) const override {
    ReducePattern p(row.type, row.op, nranks);
    p.Fill(in_place ? b.recv : b.send, row.count, rank);
    // The timed runs left the right answer in the root's buffer; start it wrong.
    if (!in_place && rank == row.root) p.Poison(b.recv, row.count);
  }

  int64_t CountWrong(const Buffers& b, bool, const RowSpec& row, int rank,
                     int nranks) const override {
    if (rank != row.root) return 0;
    return ReducePattern(row.type, row.op, nranks).CountWrong(b.recv, row.count);
  }

  std::string Describe(const RowSpec& row, bool in_place) const override {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "weftReduce(%s, count %zu, %s, %s, root %d)",
                  in_place ? "in-place" : "out-of-place", row.count, Info(row.type).name,
                  OpName(row.op), row.root);
    return buf;
  }
};

}  // namespace

std::unique_ptr<Collective> MakeReduce() { return std::make_unique<Reduce>(); }

}  // namespace weftperf
