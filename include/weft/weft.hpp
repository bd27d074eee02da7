// weft's C++ face: a thin RAII layer over the C API in weft.h. Errors become
// weft::Error exceptions carrying the result code and weftGetLastError's text.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "weft/weft.h"

namespace weft {

class Error : public std::runtime_error {
 public:
  Error(weftResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  weftResult_t code() const { return code_; }

 private:
  weftResult_t code_;
};

inline void check(weftResult_t rc, weftComm_t comm = nullptr) {
  if (rc != weftSuccess) {
    std::string msg = weftGetLastError(comm);
    throw Error(rc, std::string(weftGetErrorString(rc)) + (msg.empty() ? "" : ": " + msg));
  }
}

// band, bor, bxor: bitwise, integer element types only.
enum class Op {
  sum = weftSum,
  prod = weftProd,
  max = weftMax,
  min = weftMin,
  avg = weftAvg,
  band = weftBand,
  bor = weftBor,
  bxor = weftBxor
};

// The weft datatype of a C++ element type. fp16/bf16 callers use the raw
// overloads with weftFloat16/weftBfloat16.
template <typename T>
constexpr weftDataType_t datatype_of() {
  if constexpr (std::is_same_v<T, int8_t>) return weftInt8;
  else if constexpr (std::is_same_v<T, uint8_t>) return weftUint8;
  else if constexpr (std::is_same_v<T, int32_t>) return weftInt32;
  else if constexpr (std::is_same_v<T, uint32_t>) return weftUint32;
  else if constexpr (std::is_same_v<T, int64_t>) return weftInt64;
  else if constexpr (std::is_same_v<T, uint64_t>) return weftUint64;
  else if constexpr (std::is_same_v<T, float>) return weftFloat32;
  else if constexpr (std::is_same_v<T, double>) return weftFloat64;
  else static_assert(sizeof(T) == 0, "no weft datatype for this element type");
}

// The result of a non-blocking operation. wait() returns when the buffers hold
// the result; dropping a Future without waiting waits in its destructor.
class Future {
 public:
  Future() = default;
  explicit Future(weftRequest_t req) : req_(req) {}
  Future(Future&& o) noexcept : req_(std::exchange(o.req_, nullptr)) {}
  Future& operator=(Future&& o) noexcept {
    if (this != &o) {
      finish_quietly();
      req_ = std::exchange(o.req_, nullptr);
    }
    return *this;
  }
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;
  ~Future() { finish_quietly(); }

  bool valid() const { return req_ != nullptr; }
  void wait() { check(weftWait(&req_)); }
  // True once complete (rethrowing its error, if any).
  bool ready() {
    int done = 0;
    weftResult_t rc = weftTest(&req_, &done);
    if (rc != weftInProgress) check(rc);
    return done != 0;
  }

 private:
  void finish_quietly() { weftWait(&req_); }
  weftRequest_t req_ = nullptr;
};

class Communicator {
 public:
  Communicator(int nranks, const weftUniqueId& id, int rank) { check(weftCommInitRank(&comm_, nranks, id, rank)); }
  explicit Communicator(weftComm_t comm) : comm_(comm) {}
  Communicator(Communicator&& o) noexcept : comm_(std::exchange(o.comm_, nullptr)) {}
  Communicator& operator=(Communicator&& o) noexcept {
    if (this != &o) {
      if (comm_ != nullptr) weftCommDestroy(comm_);
      comm_ = std::exchange(o.comm_, nullptr);
    }
    return *this;
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator() {
    if (comm_ != nullptr) weftCommDestroy(comm_);
  }

  int rank() const {
    int r = -1;
    check(weftCommUserRank(comm_, &r), comm_);
    return r;
  }
  int size() const {
    int n = 0;
    check(weftCommCount(comm_, &n), comm_);
    return n;
  }
  weftComm_t handle() const { return comm_; }
  // weftCommSplit: every rank calls it; WEFT_SPLIT_NOCOLOR gives an empty one.
  Communicator split(int color, int key) const {
    weftComm_t out = nullptr;
    check(weftCommSplit(comm_, color, key, &out, nullptr), comm_);
    return Communicator(out);
  }
  explicit operator bool() const { return comm_ != nullptr; }
  // weftCommShrink: the ranks that stay, after a failure; only they call it.
  Communicator shrink(std::span<const int> exclude) const {
    weftComm_t out = nullptr;
    check(weftCommShrink(comm_, exclude.data(), static_cast<int>(exclude.size()), &out, nullptr), comm_);
    return Communicator(out);
  }
  void abort() {
    if (comm_ != nullptr) check(weftCommAbort(std::exchange(comm_, nullptr)));
  }
  // weftCommRevoke: stops every rank's pending calls; split and shrink still work.
  void revoke() { check(weftCommRevoke(comm_, WEFT_REVOKE_DEFAULT), comm_); }
  // weftCommGetAsyncError after a revoke: no call of it queued or running.
  bool quiescent() const {
    weftResult_t state = weftSuccess;
    check(weftCommGetAsyncError(comm_, &state), comm_);
    return state != weftInProgress;
  }

  // In place.
  template <typename T>
  void allreduce(std::span<T> data, Op op = Op::sum) {
    allreduce(data.data(), data.data(), data.size(), datatype_of<T>(), op);
  }
  template <typename T>
  void allreduce(std::span<const T> in, std::span<T> out, Op op = Op::sum) {
    if (in.size() != out.size()) throw Error(weftInvalidArgument, "allreduce: in and out sizes differ");
    allreduce(in.data(), out.data(), in.size(), datatype_of<T>(), op);
  }
  void allreduce(const void* in, void* out, size_t count, weftDataType_t dtype, Op op = Op::sum) {
    check(weftAllReduce(in, out, count, dtype, static_cast<weftRedOp_t>(op), comm_, nullptr), comm_);
  }

  // Root's data to everyone, in place.
  template <typename T>
  void broadcast(std::span<T> data, int root) {
    check(weftBroadcast(data.data(), data.data(), data.size(), datatype_of<T>(), root, comm_, nullptr), comm_);
  }
  // The reduction lands in `out` on the root only (out is ignored elsewhere).
  template <typename T>
  void reduce(std::span<const T> in, std::span<T> out, int root, Op op = Op::sum) {
    check(weftReduce(in.data(), out.data(), in.size(), datatype_of<T>(), static_cast<weftRedOp_t>(op),
                     root, comm_, nullptr), comm_);
  }
  // out holds size() blocks of in.size() elements, block r from rank r.
  template <typename T>
  void allgather(std::span<const T> in, std::span<T> out) {
    if (out.size() != in.size() * static_cast<size_t>(size()))
      throw Error(weftInvalidArgument, "allgather: out must hold size() * in.size() elements");
    check(weftAllGather(in.data(), out.data(), in.size(), datatype_of<T>(), comm_, nullptr), comm_);
  }
  // in holds size() blocks of out.size() elements; out gets this rank's reduced block.
  template <typename T>
  void reducescatter(std::span<const T> in, std::span<T> out, Op op = Op::sum) {
    if (in.size() != out.size() * static_cast<size_t>(size()))
      throw Error(weftInvalidArgument, "reducescatter: in must hold size() * out.size() elements");
    check(weftReduceScatter(in.data(), out.data(), out.size(), datatype_of<T>(),
                            static_cast<weftRedOp_t>(op), comm_, nullptr), comm_);
  }
  // Block p of in goes to rank p; block p of out comes from rank p.
  template <typename T>
  void alltoall(std::span<const T> in, std::span<T> out) {
    size_t n = static_cast<size_t>(size());
    if (in.size() != out.size() || in.size() % n != 0)
      throw Error(weftInvalidArgument, "alltoall: in and out must hold size() equal blocks");
    check(weftAlltoAll(in.data(), out.data(), in.size() / n, datatype_of<T>(), comm_, nullptr), comm_);
  }
  template <typename T>
  void send(std::span<const T> data, int peer) {
    check(weftSend(data.data(), data.size(), datatype_of<T>(), peer, comm_, nullptr), comm_);
  }
  template <typename T>
  void recv(std::span<T> data, int peer) {
    check(weftRecv(data.data(), data.size(), datatype_of<T>(), peer, comm_, nullptr), comm_);
  }
  void barrier() { check(weftBarrier(comm_), comm_); }

  template <typename T>
  Future allreduce_async(std::span<T> data, Op op = Op::sum) {
    return allreduce_async(data.data(), data.data(), data.size(), datatype_of<T>(), op);
  }
  Future allreduce_async(const void* in, void* out, size_t count, weftDataType_t dtype,
                         Op op = Op::sum) {
    weftRequest_t req = nullptr;
    check(weftAllReduceAsync(in, out, count, dtype, static_cast<weftRedOp_t>(op), comm_, &req), comm_);
    return Future(req);
  }
  template <typename T>
  Future broadcast_async(std::span<T> data, int root) {
    weftRequest_t req = nullptr;
    check(weftBroadcastAsync(data.data(), data.data(), data.size(), datatype_of<T>(), root, comm_, &req), comm_);
    return Future(req);
  }
  template <typename T>
  Future reduce_async(std::span<const T> in, std::span<T> out, int root, Op op = Op::sum) {
    weftRequest_t req = nullptr;
    check(weftReduceAsync(in.data(), out.data(), in.size(), datatype_of<T>(), static_cast<weftRedOp_t>(op), root,
                          comm_, &req), comm_);
    return Future(req);
  }
  template <typename T>
  Future allgather_async(std::span<const T> in, std::span<T> out) {
    if (out.size() != in.size() * static_cast<size_t>(size()))
      throw Error(weftInvalidArgument, "allgather: out must hold size() * in.size() elements");
    weftRequest_t req = nullptr;
    check(weftAllGatherAsync(in.data(), out.data(), in.size(), datatype_of<T>(), comm_, &req), comm_);
    return Future(req);
  }
  template <typename T>
  Future reducescatter_async(std::span<const T> in, std::span<T> out, Op op = Op::sum) {
    if (in.size() != out.size() * static_cast<size_t>(size()))
      throw Error(weftInvalidArgument, "reducescatter: in must hold size() * out.size() elements");
    weftRequest_t req = nullptr;
    check(weftReduceScatterAsync(in.data(), out.data(), out.size(), datatype_of<T>(), static_cast<weftRedOp_t>(op),
                                 comm_, &req), comm_);
    return Future(req);
  }
  template <typename T>
  Future alltoall_async(std::span<const T> in, std::span<T> out) {
    size_t n = static_cast<size_t>(size());
    if (in.size() != out.size() || in.size() % n != 0)
      throw Error(weftInvalidArgument, "alltoall: in and out must hold size() equal blocks");
    weftRequest_t req = nullptr;
    check(weftAlltoAllAsync(in.data(), out.data(), in.size() / n, datatype_of<T>(), comm_, &req), comm_);
    return Future(req);
  }
  template <typename T>
  Future send_async(std::span<const T> data, int peer) {
    weftRequest_t req = nullptr;
    check(weftSendAsync(data.data(), data.size(), datatype_of<T>(), peer, comm_, &req), comm_);
    return Future(req);
  }
  template <typename T>
  Future recv_async(std::span<T> data, int peer) {
    weftRequest_t req = nullptr;
    check(weftRecvAsync(data.data(), data.size(), datatype_of<T>(), peer, comm_, &req), comm_);
    return Future(req);
  }
  // *source: the sender's rank once the future is ready.
  template <typename T>
  Future recv_any_async(std::span<T> data, int* source) {
    weftRequest_t req = nullptr;
    check(weftRecvAnyAsync(data.data(), data.size(), datatype_of<T>(), source, comm_, &req), comm_);
    return Future(req);
  }

 private:
  weftComm_t comm_ = nullptr;
};

// Sends, receives and collectives issued while a Group is alive run together
// when it is destroyed (weftGroupStart/End), so a send and a receive to
// different peers cannot deadlock. End() reports the group's error.
class Group {
 public:
  Group() { check(weftGroupStart()); }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  ~Group() {
    if (open_) weftGroupEnd();
  }
  void end() {
    open_ = false;
    check(weftGroupEnd());
  }
  // Runs nothing: the group's estimated seconds instead (weftGroupSimulateEnd).
  double simulate_end() {
    double seconds = 0;
    open_ = false;
    check(weftGroupSimulateEnd(&seconds));
    return seconds;
  }

 private:
  bool open_ = true;
};

// Rank, size and rendezvous from weft-run, torchrun, Open MPI or Slurm.
inline Communicator init_from_env() {
  weftComm_t comm = nullptr;
  check(weftCommInitFromEnv(&comm, nullptr));
  return Communicator(comm);
}

}  // namespace weft
