#include "transports/shm/slot_copy.h"

#include <algorithm>
#include <cstring>

#include "base/stream_copy.h"
#include "base/wait.h"

namespace weft::shm {

bool SlotCopy::next_streams() {
  if (mode_ != Mode::Auto) return mode_ == Mode::Streaming;
  // One copy each way first, then every kProbeEvery-th slot the other way.
  uint32_t n = slots_++;
  if (n < 2) return n == 1;
  return n % kProbeEvery == 0 ? !streaming_ : streaming_;
}

void SlotCopy::record(bool streamed, uint64_t ticks, size_t bytes) {
  if (bytes == 0) return;
  double sample = static_cast<double>(ticks) / static_cast<double>(bytes);
  double& avg = ticks_per_byte_[streamed ? 1 : 0];
  // A copy the scheduler interrupted can take milliseconds: a sample counts as
  // at most twice the average, so one preemption does not flip the choice and a
  // lasting change still does within a few slots.
  if (avg > 0) sample = std::min(sample, 2 * avg);
  avg = avg > 0 ? avg + (sample - avg) / 8 : std::max(sample, 1e-9);
  if (ticks_per_byte_[0] > 0 && ticks_per_byte_[1] > 0)
    streaming_ = ticks_per_byte_[1] * 100 < ticks_per_byte_[0] * stream_pct_;
}

void SlotCopy::copy(void* slot, const void* src, size_t bytes) {
  const bool stream = next_streams();
  const bool timed = mode_ == Mode::Auto;
  const uint64_t t0 = timed ? ticks() : 0;
  if (stream)
    stream_copy(slot, src, bytes);
  else
    std::memcpy(slot, src, bytes);
  if (timed) record(stream, ticks() - t0, bytes);
}

}  // namespace weft::shm
