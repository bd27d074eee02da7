// Where a staged call's device memory lives in its pinned slot
// (device_staging.h): the ranges the call reads (in: copied into the slot before
// it runs) and writes (out: copied back after), merged into disjoint segments
// at 256-byte-aligned offsets (add), or each put where the caller says (put:
// the pieces of a chunk gathered side by side; not merged).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"

namespace weft {

class StagingLayout {
 public:
  void add(const void* p, size_t bytes, bool in, bool out) {
    if (bytes > 0) segs_.push_back({reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + bytes, in, out, 0});
  }
  // Device range [p, p + bytes) at byte `at` of the slot. A layout is made by
  // add() or by put(), not both.
  void put(const void* p, size_t bytes, bool in, bool out, size_t at) {
    if (bytes == 0) return;
    segs_.push_back({reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + bytes, in, out, at});
    end_ = std::max(end_, at + bytes);
    fixed_ = true;
  }
  // Merges overlapping ranges (a written segment is then written whole: every
  // byte of it is received, or read first and copied back as it was) and places
  // them in the slot; returns the bytes the slot needs. Ranges that only touch
  // stay apart: they may belong to two allocations, and the driver copies within
  // one allocation only.
  size_t place() {
    if (fixed_) return end_;
    std::sort(segs_.begin(), segs_.end(), [](const Seg& a, const Seg& b) { return a.lo < b.lo; });
    std::vector<Seg> merged;
    for (const Seg& s : segs_) {
      if (!merged.empty() && s.lo < merged.back().hi) {
        Seg& m = merged.back();
        m.hi = std::max(m.hi, s.hi);
        m.in = m.in || s.in;
        m.out = m.out || s.out;
      } else {
        merged.push_back(s);
      }
    }
    segs_ = std::move(merged);
    size_t at = 0;
    for (Seg& s : segs_) {
      s.at = at;
      at += (s.hi - s.lo + 255) / 256 * 256;
    }
    return at;
  }
  // Where device address p lives in the slot at `base`.
  void* host(unsigned char* base, const void* p) const {
    const auto q = reinterpret_cast<uintptr_t>(p);
    for (const Seg& s : segs_)
      if (q >= s.lo && q < s.hi) return base + s.at + (q - s.lo);
    return nullptr;  // zero bytes: never touched
  }
  template <class F>
  Status each(bool in, F f) const {
    for (const Seg& s : segs_)
      if (in ? s.in : s.out) WEFT_TRY(f(reinterpret_cast<void*>(s.lo), s.hi - s.lo, s.at));
    return Status::Ok();
  }

 private:
  struct Seg {
    uintptr_t lo, hi;
    bool in, out;
    size_t at;
  };
  std::vector<Seg> segs_;
  bool fixed_ = false;  // made by put()
  size_t end_ = 0;
};

}  // namespace weft
