// Data checks (-c 1). For reductions, each rank's inputs are small non-negative
// integers chosen per (datatype, op, rank count) so that the exact result of
// sum/prod/min/max/avg over all ranks is representable in the datatype and every
// partial result on the way is exact too, whatever order the algorithm reduces in.
// The host computes the expectation exactly; the comparison is bit-exact, except
// float avg (see Tolerant()).
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/weft.h"

namespace weftperf {

class ReducePattern {
 public:
  ReducePattern(weftDataType_t type, weftRedOp_t op, int nranks);

  // What `rank` contributes at element i.
  int64_t Value(int rank, size_t i) const;
  // The reduction of Value(0..nranks-1, i), as the element's raw bits.
  uint64_t ExpectedRaw(size_t i) const;
  // Float avg is sum / nranks, which is inexact when nranks does not divide the sum;
  // an implementation may divide or multiply by 1/nranks, so one ulp either way of
  // the correctly rounded quotient is accepted. Everything else must match exactly.
  bool Tolerant() const { return tolerant_; }

  // buf[k] = Value(rank, first + k) for k in [0, count): `first` places a slice of
  // the element space, as reduce-scatter checks its own block of the result.
  void Fill(void* buf, size_t count, int rank, size_t first = 0) const;
  // Elements k of buf[0..count) that differ from ExpectedRaw(first + k).
  int64_t CountWrong(const void* buf, size_t count, size_t first = 0) const;
  // buf[k] = the complement of ExpectedRaw(first + k), so an output element the
  // call never writes is counted wrong (the previous run left the right answer).
  void Poison(void* buf, size_t count, size_t first = 0) const;

 private:
  enum class Mode { kSpread, kIndicator, kPow2, kAny };

  weftDataType_t type_;
  weftRedOp_t op_;
  int nranks_;
  size_t size_;
  Mode mode_ = Mode::kAny;
  int64_t modulus_ = 1;  // kSpread/kAny: values in [0, modulus); kIndicator/kPow2: max count
  bool tolerant_ = false;
  uint64_t small_raw_[256];  // raw bits of 0..255, for Fill
};

// Data check for collectives that only move data (broadcast, all-gather, all-to-all,
// send/recv): element i of what `source` sends has bits that depend on (source, i)
// and look random, so a block that arrives from the wrong rank or lands at the
// wrong offset is caught, not just a missing one. Integers use every bit pattern;
// floats clear the exponent's top bit, so every value is finite (no NaN payloads
// or infinities for a copy path to be excused for changing). Compared bit-exactly.
class CopyPattern {
 public:
  explicit CopyPattern(weftDataType_t type);

  uint64_t Raw(int source, size_t i) const;
  // buf[k] = Raw(source, first + k) for k in [0, count).
  void Fill(void* buf, size_t count, int source, size_t first = 0) const;
  int64_t CountWrong(const void* buf, size_t count, int source, size_t first = 0) const;
  // buf[k] = the complement of Raw(source, first + k): an output element the call
  // never writes is then counted wrong instead of passing on a previous run's data.
  void Poison(void* buf, size_t count, int source, size_t first = 0) const;

 private:
  size_t size_;
  uint64_t mask_;  // the element's bits that the pattern may set
};

}  // namespace weftperf
