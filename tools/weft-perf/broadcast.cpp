// weft-perf broadcast: the root's buffer ends up in every rank's receive buffer.
// In place (NCCL's form) means sendbuff == recvbuff; only the root's is read.
#include <cstdio>

#include "check.h"
#include "collective.h"
#include "datatype.h"

namespace weftperf {
namespace {

class Broadcast final : public Collective {
 public:
  const char* Name() const override { return "broadcast"; }
  bool HasOp() const override { return false; }
  bool HasRoot() const override { return true; }
  size_t CountForBytes(size_t bytes, size_t type_size, int) const override {
    return bytes / type_size;
  }
  size_t RowBytes(size_t count, size_t type_size, int) const override {
    return count * type_size;
  }
  // nccl-tests' factor: a pipelined broadcast moves the buffer once over every
  // link, so bus bandwidth is the algorithm bandwidth.
  double BusFactor(int) const override { return 1.0; }

  weftResult_t Run(const Buffers& b, bool in_place, const RowSpec& row,
                   weftComm_t comm) const override {
    const void* send = in_place ? b.recv : b.send;
    return weftBroadcast(send, b.recv, row.count, row.type, row.root, comm, b.stream);
  }

  void FillInputs(const Buffers& b, bool in_place, const RowSpec& row, int rank,
                  int) const override {
    CopyPattern p(row.type);
    if (rank == row.root) p.Fill(in_place ? b.recv : b.send, row.count, row.root);
    // Every receive buffer the call must write starts wrong, so a rank that is
    // skipped (or left with the timed runs' data) shows up in #wrong.
    if (!(in_place && rank == row.root)) p.Poison(b.recv, row.count, row.root);
  }

  int64_t CountWrong(const Buffers& b, bool, const RowSpec& row, int, int) const override {
    return CopyPattern(row.type).CountWrong(b.recv, row.count, row.root);
  }

  std::string Describe(const RowSpec& row, bool in_place) const override {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "weftBroadcast(%s, count %zu, %s, root %d)",
                  in_place ? "in-place" : "out-of-place", row.count, Info(row.type).name,
                  row.root);
    return buf;
  }
};

}  // namespace

std::unique_ptr<Collective> MakeBroadcast() { return std::make_unique<Broadcast>(); }

}  // namespace weftperf
