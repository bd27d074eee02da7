// One benchmarked collective: how a row's byte size maps to counts, how to call
// it, how to fill and check its buffers, and its bus-bandwidth factor. One file
// per subcommand (allreduce.cpp, broadcast.cpp, ...), listed in collective.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "weft/weft.h"

namespace weftperf {

// Each buffer holds at least `capacity` bytes (the sweep's maximum).
struct Buffers {
  void* send = nullptr;
  void* recv = nullptr;
  size_t capacity = 0;
  // --device: send and recv are device memory, every call goes on this stream,
  // and the inputs are filled and checked in host twins copied to and from them.
  void* stream = nullptr;
  void* host_send = nullptr;
  void* host_recv = nullptr;
  size_t send_bytes = 0, recv_bytes = 0;
  // What FillInputs and CountWrong work on: the host twins, or the buffers themselves.
  Buffers Host() const {
    Buffers h = *this;
    if (stream != nullptr) {
      h.send = host_send;
      h.recv = host_recv;
    }
    return h;
  }
};

struct RowSpec {
  size_t count = 0;  // the count argument of the call
  weftDataType_t type = weftFloat32;
  weftRedOp_t op = weftSum;
  int root = -1;  // -1: the collective has no root
};

class Collective {
 public:
  virtual ~Collective() = default;
  virtual const char* Name() const = 0;
  virtual bool HasOp() const = 0;  // false: the redop column prints "none"
  // true: the row's root is -r (broadcast, reduce); false: the root column prints -1.
  virtual bool HasRoot() const { return false; }
  // false: NCCL defines no in-place form (all-to-all, send/recv); the in-place
  // columns print N/A and Run/FillInputs/CountWrong only see in_place == false.
  virtual bool HasInPlace() const { return true; }
  // Fewer ranks and weft-perf stops before the sweep with a message saying why.
  virtual int MinRanks() const { return 1; }
  // The count argument for a row of `bytes`; 0 skips the row.
  virtual size_t CountForBytes(size_t bytes, size_t type_size, int nranks) const = 0;
  // The size column (bytes the collective moves per rank, nccl-tests' definition).
  virtual size_t RowBytes(size_t count, size_t type_size, int nranks) const = 0;
  // Bytes each buffer needs for a sweep up to max_bytes (allgather's receive
  // buffer, for one, is nranks times its send buffer).
  virtual size_t SendCapacity(size_t max_bytes, int) const { return max_bytes; }
  virtual size_t RecvCapacity(size_t max_bytes, int) const { return max_bytes; }
  // busbw = algbw * BusFactor: what each link must carry, comparable across rank counts.
  virtual double BusFactor(int nranks) const = 0;

  virtual weftResult_t Run(const Buffers& b, bool in_place, const RowSpec& row,
                           weftComm_t comm) const = 0;
  // Sets this rank's inputs for a checked run.
  virtual void FillInputs(const Buffers& b, bool in_place, const RowSpec& row, int rank,
                          int nranks) const = 0;
  // Wrong output elements on this rank after a run on FillInputs' data.
  virtual int64_t CountWrong(const Buffers& b, bool in_place, const RowSpec& row, int rank,
                             int nranks) const = 0;
  // The call as it would be written, for error messages.
  virtual std::string Describe(const RowSpec& row, bool in_place) const = 0;
};

// nullptr for an unknown name.
std::unique_ptr<Collective> MakeCollective(const std::string& name);
// The names MakeCollective knows, for the usage text (inline: the argument
// parser needs it without the collectives).
inline const char* CollectiveNames() {
  return "allreduce broadcast reduce allgather reducescatter alltoall sendrecv";
}

std::unique_ptr<Collective> MakeAllReduce();
std::unique_ptr<Collective> MakeBroadcast();
std::unique_ptr<Collective> MakeReduce();
std::unique_ptr<Collective> MakeAllGather();
std::unique_ptr<Collective> MakeReduceScatter();
std::unique_ptr<Collective> MakeAlltoAll();
std::unique_ptr<Collective> MakeSendRecv();

// This rank and the rank count, for Run implementations whose buffers or peers
// depend on them (in-place all-gather offsets, send/recv neighbours).
weftResult_t RankAndCount(weftComm_t comm, int* rank, int* nranks);

}  // namespace weftperf
