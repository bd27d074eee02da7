#include "check.h"

#include <algorithm>

#include "datatype.h"

namespace weftperf {
namespace {

// Spreads (rank, element) over 64 bits so neighbouring elements and ranks get
// unrelated values: a misplaced chunk or a missing contribution shows.
uint64_t Mix(int rank, size_t i) {
  uint64_t h = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull +
               static_cast<uint64_t>(rank + 1) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

// The bits an element of `size` bytes has.
uint64_t WidthMask(size_t size) {
  return size == 8 ? ~uint64_t{0} : (uint64_t{1} << (size * 8)) - 1;
}

}  // namespace

ReducePattern::ReducePattern(weftDataType_t type, weftRedOp_t op, int nranks)
    : type_(type), op_(op), nranks_(nranks), size_(Info(type).size) {
  const TypeInfo& info = Info(type);
  const int64_t n = nranks;
  switch (op) {
    case weftSum:
    case weftAvg:
      // All values >= 0, so every partial sum is <= the total <= max_exact.
      modulus_ = std::min<int64_t>(16, info.max_exact / n + 1);
      if (modulus_ >= 2) {
        mode_ = Mode::kSpread;
      } else {
        // More ranks than exact integers (int8 past 127 ranks, bf16 past 256): at
        // element i exactly c_i ranks contribute 1, c_i in [0, min(max_exact, 7)].
        mode_ = Mode::kIndicator;
        modulus_ = std::min<int64_t>(info.max_exact, 7);
      }
      tolerant_ = (op == weftAvg) && info.is_float;
      break;
    case weftProd:
      // Values 1 or 2; at element i exactly k_i ranks contribute 2, so the product
      // is 2^k_i with k_i <= max_pow2, and partial products only grow to it.
      mode_ = Mode::kPow2;
      modulus_ = std::min<int64_t>(info.max_pow2, n);
      break;
    default:  // min, max: any exactly representable value works
      mode_ = Mode::kAny;
      modulus_ = std::min<int64_t>(info.max_exact + 1, 199);
      break;
  }
  for (int v = 0; v < 256; ++v) small_raw_[v] = EncodeInt(type, v);
}

int64_t ReducePattern::Value(int rank, size_t i) const {
  switch (mode_) {
    case Mode::kSpread:
    case Mode::kAny:
      return static_cast<int64_t>(Mix(rank, i) % static_cast<uint64_t>(modulus_));
    case Mode::kIndicator:
    case Mode::kPow2: {
      // Which ranks contribute the "1"/"2" rotates with i, so every rank's slot of
      // every element matters.
      size_t k = i % static_cast<size_t>(modulus_ + 1);
      bool chosen = (static_cast<size_t>(rank) + i) % static_cast<size_t>(nranks_) < k;
      if (mode_ == Mode::kIndicator) return chosen ? 1 : 0;
      return chosen ? 2 : 1;
    }
  }
  return 0;
}

uint64_t ReducePattern::ExpectedRaw(size_t i) const {
  int64_t acc = Value(0, i);
  for (int r = 1; r < nranks_; ++r) {
    int64_t v = Value(r, i);
    switch (op_) {
      case weftSum:
      case weftAvg:
        acc += v;
        break;
      case weftProd:
        acc *= v;
        break;
      case weftMax:
        acc = std::max(acc, v);
        break;
      case weftMin:
        acc = std::min(acc, v);
        break;
      default:
        break;
    }
  }
  if (op_ == weftAvg) {
    if (Info(type_).is_float)
      return EncodeReal(type_, static_cast<double>(acc) / static_cast<double>(nranks_));
    return EncodeInt(type_, acc / nranks_);  // non-negative: truncation == floor
  }
  return EncodeInt(type_, acc);
}

void ReducePattern::Fill(void* buf, size_t count, int rank, size_t first) const {
  for (size_t k = 0; k < count; ++k)
    StoreRaw(buf, k, size_, small_raw_[Value(rank, first + k)]);  // values are < 256
}

void ReducePattern::Poison(void* buf, size_t count, size_t first) const {
  for (size_t k = 0; k < count; ++k)
    StoreRaw(buf, k, size_, ~ExpectedRaw(first + k) & WidthMask(size_));
}

int64_t ReducePattern::CountWrong(const void* buf, size_t count, size_t first) const {
  const uint64_t sign_bit = uint64_t{1} << (size_ * 8 - 1);
  int64_t wrong = 0;
  for (size_t k = 0; k < count; ++k) {
    uint64_t got = LoadRaw(buf, k, size_);
    uint64_t want = ExpectedRaw(first + k);
    if (got == want) continue;
    // Positive floats order like their bit patterns: adjacent patterns are 1 ulp apart.
    if (tolerant_ && (got & sign_bit) == 0 && (got > want ? got - want : want - got) <= 1)
      continue;
    ++wrong;
  }
  return wrong;
}

CopyPattern::CopyPattern(weftDataType_t type) : size_(Info(type).size) {
  mask_ = WidthMask(size_);
  if (Info(type).is_float) {
    // The exponent's top bit: below it the exponent is never all ones.
    int top_exponent_bit = type == weftFloat16 ? 14 : static_cast<int>(size_ * 8) - 2;
    mask_ &= ~(uint64_t{1} << top_exponent_bit);
  }
}

uint64_t CopyPattern::Raw(int source, size_t i) const { return Mix(source, i) & mask_; }

void CopyPattern::Fill(void* buf, size_t count, int source, size_t first) const {
  for (size_t k = 0; k < count; ++k) StoreRaw(buf, k, size_, Raw(source, first + k));
}

int64_t CopyPattern::CountWrong(const void* buf, size_t count, int source, size_t first) const {
  int64_t wrong = 0;
  for (size_t k = 0; k < count; ++k) wrong += LoadRaw(buf, k, size_) != Raw(source, first + k);
  return wrong;
}

void CopyPattern::Poison(void* buf, size_t count, int source, size_t first) const {
  for (size_t k = 0; k < count; ++k)
    StoreRaw(buf, k, size_, ~Raw(source, first + k) & WidthMask(size_));
}

}  // namespace weftperf
