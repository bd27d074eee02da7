#include "transports/shm/slot_copy.h"

#include <algorithm>
#include <cstring>

#include "base/stream_copy.h"
#include "base/wait.h"

namespace weft::shm {

void TickAverage::add(uint64_t ticks, size_t bytes) {
  if (bytes == 0) return;
  double sample = static_cast<double>(ticks) / static_cast<double>(bytes);
  if (avg_ > 0) sample = std::min(sample, 2 * avg_);
  avg_ = avg_ > 0 ? avg_ + (sample - avg_) / 8 : std::max(sample, 1e-9);
}

bool SlotCopy::next_streams() {
  if (mode_ != Mode::Auto) return mode_ == Mode::Streaming;
  // One copy each way first, then every kProbeEvery-th slot the other way.
  uint32_t n = slots_++;
  if (n < 2) return n == 1;
  return n % kProbeEvery == 0 ? !streaming_ : streaming_;
}

void SlotCopy::record(bool streamed, uint64_t ticks, size_t bytes) {
  write_[streamed ? 1 : 0].add(ticks, bytes);
  decide();
}

void SlotCopy::reader_costs(double cached, double streamed) {
  read_[0] = cached;
  read_[1] = streamed;
  decide();
}

void SlotCopy::decide() {
  const double w0 = write_[0].value(), w1 = write_[1].value();
  if (w0 <= 0 || w1 <= 0) return;
  // A slot moves at the pace of its slower end; a reader's cost counts once
  // it has timed both kinds.
  const bool read = read_[0] > 0 && read_[1] > 0;
  const double cached = read ? std::max(w0, read_[0]) : w0;
  const double streamed = read ? std::max(w1, read_[1]) : w1;
  streaming_ = streamed * 100 < cached * stream_pct_;
}

bool SlotCopy::copy(void* slot, const void* src, size_t bytes) {
  const bool stream = next_streams();
  const bool timed = mode_ == Mode::Auto;
  const uint64_t t0 = timed ? ticks() : 0;
  if (stream)
    stream_copy(slot, src, bytes);
  else
    std::memcpy(slot, src, bytes);
  if (timed) record(stream, ticks() - t0, bytes);
  return stream;
}

}  // namespace weft::shm
