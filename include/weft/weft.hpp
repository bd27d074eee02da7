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

enum class Op { sum = weftSum, prod = weftProd, max = weftMax, min = weftMin, avg = weftAvg };

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
  void wait() {
    if (req_ == nullptr) return;
    weftResult_t rc = weftWait(std::exchange(req_, nullptr));
    check(rc);
  }
  // True once complete (rethrowing its error, if any).
  bool ready() {
    if (req_ == nullptr) return true;
    int done = 0;
    weftResult_t rc = weftTest(req_, &done);
    if (done) req_ = nullptr;
    check(rc);
    return done != 0;
  }

 private:
  void finish_quietly() {
    if (req_ != nullptr) weftWait(std::exchange(req_, nullptr));
  }
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
  void abort() {
    if (comm_ != nullptr) check(weftCommAbort(std::exchange(comm_, nullptr)));
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

 private:
  weftComm_t comm_ = nullptr;
};

// Rank, size and rendezvous from weft-run, torchrun, Open MPI or Slurm.
inline Communicator init_from_env() {
  weftComm_t comm = nullptr;
  check(weftCommInitFromEnv(&comm, nullptr));
  return Communicator(comm);
}

}  // namespace weft
