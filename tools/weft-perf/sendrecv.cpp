// weft-perf sendrecv: every rank sends its buffer to rank + 1 and receives rank - 1's
// (mod nranks), both inside one weftGroupStart/weftGroupEnd so the ring cannot
// deadlock; nccl-tests' sendrecv_perf. Out of place only: the in-place columns
// print N/A (a rank's receive would overwrite what it is still sending).
#include <cstdio>

#include "check.h"
#include "collective.h"
#include "datatype.h"

namespace weftperf {
namespace {

int Prev(int rank, int nranks) { return (rank + nranks - 1) % nranks; }

class SendRecv final : public Collective {
 public:
  const char* Name() const override { return "sendrecv"; }
  bool HasOp() const override { return false; }
  bool HasInPlace() const override { return false; }
  // weft.h: a group's send and receive go to peers other than the caller, so one
  // rank has nobody to talk to (nccl-tests would time a self-copy there).
  int MinRanks() const override { return 2; }
  size_t CountForBytes(size_t bytes, size_t type_size, int) const override {
    return bytes / type_size;
  }
  size_t RowBytes(size_t count, size_t type_size, int) const override {
    return count * type_size;
  }
  // One buffer over one link per rank: nccl-tests' factor 1.
  double BusFactor(int) const override { return 1.0; }

  weftResult_t Run(const Buffers& b, bool, const RowSpec& row, weftComm_t comm) const override {
    int rank = 0, nranks = 0;
    if (weftResult_t rc = RankAndCount(comm, &rank, &nranks); rc != weftSuccess) return rc;
    weftResult_t rc = weftGroupStart();
    if (rc != weftSuccess) return rc;
    // The group is ended even when recording a call failed, so it does not stay
    // open and swallow the next iteration's calls.
    weftResult_t send = weftSend(b.send, row.count, row.type, (rank + 1) % nranks, comm, b.stream);
    weftResult_t recv = weftRecv(b.recv, row.count, row.type, Prev(rank, nranks), comm, b.stream);
    rc = weftGroupEnd();
    if (send != weftSuccess) return send;
    return recv != weftSuccess ? recv : rc;
  }

  void FillInputs(const Buffers& b, bool, const RowSpec& row, int rank,
                  int nranks) const override {
    CopyPattern p(row.type);
    p.Fill(b.send, row.count, rank);
    p.Poison(b.recv, row.count, Prev(rank, nranks));
  }

  int64_t CountWrong(const Buffers& b, bool, const RowSpec& row, int rank,
                     int nranks) const override {
    return CopyPattern(row.type).CountWrong(b.recv, row.count, Prev(rank, nranks));
  }

  std::string Describe(const RowSpec& row, bool) const override {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "weftSend/weftRecv group(count %zu, %s)", row.count,
                  Info(row.type).name);
    return buf;
  }
};

}  // namespace

std::unique_ptr<Collective> MakeSendRecv() { return std::make_unique<SendRecv>(); }

}  // namespace weftperf
