// How a sender copies full slots of a bulk message (transport::SendHint::Bulk)
// into the FIFO: with ordinary (cached) stores, or with streaming (non-temporal)
// stores that send the lines to memory without first taking them from the reader's
// cache.
//
// Cached stores win while the two cores hand lines over cheaply: the reader then
// finds the data in a shared cache. On some VMs that hand-over slows down in
// spells lasting seconds (2026-11-27, EPYC VM): a plain two-process FIFO fell from
// 8 to 2 GB/s, weft's 2-rank 64 MiB all-reduce from 13 to 37-48 ms, while the
// same FIFO with streaming stores kept 4.4-5.3 GB/s. In those spells the sender's
// cached copies run at 15-36% of streaming copies' speed (52-124% otherwise), so
// the sender times its copies and streams while cached ones run under
// WEFT_SHM_STREAM_PCT % of streaming ones' speed; every 64th slot goes the other
// way to keep both averages current. Bulk messages only: from a cache-hot source
// (a 2 MiB all-reduce) streaming copies look 3-5x faster to the sender while the
// reader then fetches every line from memory (calls 2x slower).
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::shm {

class SlotCopy {
 public:
  enum class Mode : int8_t { Auto = -1, Cached = 0, Streaming = 1 };
  static constexpr uint32_t kProbeEvery = 64;

  SlotCopy(Mode mode, int stream_pct) : mode_(mode), stream_pct_(stream_pct) {}

  // Copies one full slot the way the policy says, timing it in Auto mode.
  void copy(void* slot, const void* src, size_t bytes);

  // The policy without the copy (for tests): whether the next slot streams, and
  // what a copy of `bytes` took in ticks (base/wait.h).
  bool next_streams();
  void record(bool streamed, uint64_t ticks, size_t bytes);
  // Whether slots stream now, apart from the probes of the other kind.
  bool streaming() const { return streaming_; }

 private:
  Mode mode_;
  int stream_pct_;
  double ticks_per_byte_[2] = {0, 0};  // [cached, streaming]; 0 = not measured yet
  uint32_t slots_ = 0;
  bool streaming_ = false;
};

}  // namespace weft::shm
