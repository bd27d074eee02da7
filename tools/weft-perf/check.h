// Data check for reductions (-c 1): each rank's inputs are small non-negative
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

  void Fill(void* buf, size_t count, int rank) const;
  // Elements of buf[0..count) that differ from the expectation.
  int64_t CountWrong(const void* buf, size_t count) const;

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

}  // namespace weftperf
