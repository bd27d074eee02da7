// How a sender copies the full slots of a message larger than a slot into the
// FIFO: with ordinary (cached) stores, or with streaming (non-temporal) stores
// that send the lines to memory without first taking them from the reader's cache.
//
// Cached stores win while the two cores hand lines over cheaply: the reader then
// finds the data in a shared cache. On some VMs that hand-over slows down in
// spells lasting seconds (2026-11-27, EPYC VM): a plain two-process FIFO fell from
// 8 to 2 GB/s, weft's 2-rank 64 MiB all-reduce from 13 to 37-48 ms, while the
// same FIFO with streaming stores kept 4.4-5.3 GB/s. In those spells the sender's
// cached copies run at 15-36% of streaming copies' speed (52-124% otherwise).
//
// The sender's own timings do not suffice: from a cache-hot source (a 2 MiB
// all-reduce) streaming copies look 3-5x faster to the sender while the reader
// then fetches every line from memory (calls 2x slower). So both ends time their
// copies of these slots, each kind apart: the reader publishes its averages in
// the channel's head line, and the sender streams while the slower end of a
// streamed slot takes under WEFT_SHM_STREAM_PCT % of the slower end of a cached
// one. Every 64th slot goes the other way to keep all four averages current.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::shm {

// A running average of ticks per byte (base/wait.h's ticks()) in which no
// sample counts for more than twice the average: a copy the scheduler
// interrupted can take milliseconds, and one must not flip the choice, while a
// lasting change still does within a few samples.
class TickAverage {
 public:
  void add(uint64_t ticks, size_t bytes);
  double value() const { return avg_; }  // 0 until the first sample

 private:
  double avg_ = 0;
};

class SlotCopy {
 public:
  enum class Mode : int8_t { Auto = -1, Cached = 0, Streaming = 1 };
  static constexpr uint32_t kProbeEvery = 64;

  SlotCopy(Mode mode, int stream_pct) : mode_(mode), stream_pct_(stream_pct) {}

  // Copies one full slot the way the policy says, timing it in Auto mode;
  // returns whether it streamed.
  bool copy(void* slot, const void* src, size_t bytes);

  // The policy without the copy (for tests): whether the next slot streams,
  // what a copy of `bytes` took the sender in ticks, and what the reader
  // published (ticks per byte; 0 = not measured yet).
  bool next_streams();
  void record(bool streamed, uint64_t ticks, size_t bytes);
  void reader_costs(double cached, double streamed);
  // Whether slots stream now, apart from the probes of the other kind.
  bool streaming() const { return streaming_; }

 private:
  void decide();

  Mode mode_;
  int stream_pct_;
  TickAverage write_[2];   // [cached, streamed]
  double read_[2] = {0, 0};
  uint32_t slots_ = 0;
  bool streaming_ = false;
};

}  // namespace weft::shm
