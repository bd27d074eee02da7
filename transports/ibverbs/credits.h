// Receiver-posted credits: the flow control of the verbs data path. The
// receiver owns a ring of `slots` buffers that the sender fills with RDMA
// writes; the sender may only write into a slot the receiver has freed. Each
// side keeps counters only (no shared memory): the sender counts slots used,
// the receiver counts slots consumed and returns them in batches (a credit
// message, or piggybacked on its own traffic) so that small messages do not
// each cost a return trip.
#pragma once

#include <cstdint>

namespace weft::ib {

class SenderCredits {
 public:
  explicit SenderCredits(uint32_t slots) : slots_(slots) {}
  uint32_t available() const { return static_cast<uint32_t>(slots_ - (used_ - returned_)); }
  // Takes one slot; false when none is free (the send must wait).
  bool take() {
    if (available() == 0) return false;
    ++used_;
    return true;
  }
  // The receiver's running total of slots it freed. Totals only grow: an old
  // (reordered or repeated) total is ignored; one beyond what was used is a
  // protocol error.
  bool on_returned(uint64_t total) {
    if (total > used_) return false;
    if (total > returned_) returned_ = total;
    return true;
  }
  uint64_t used() const { return used_; }

 private:
  uint32_t slots_;
  uint64_t used_ = 0;
  uint64_t returned_ = 0;
};

class ReceiverCredits {
 public:
  // Return credits once `batch` slots are free, or at once when the sender
  // may be blocked (all slots in flight).
  ReceiverCredits(uint32_t slots, uint32_t batch)
      : slots_(slots), batch_(batch == 0 ? 1 : (batch > slots ? slots : batch)) {}
  // A slot was consumed (its data handed on).
  void consumed() { ++consumed_; }
  // The total to send back now, or 0 when it can wait.
  uint64_t to_return() const {
    uint64_t pending = consumed_ - reported_;
    if (pending == 0) return 0;
    // The sender holds slots_ - (its used - reported) credits; with none it stalls.
    if (pending >= batch_ || pending == slots_) return consumed_;
    return 0;
  }
  void returned(uint64_t total) { reported_ = total; }
  uint64_t consumed_total() const { return consumed_; }

 private:
  uint32_t slots_;
  uint32_t batch_;
  uint64_t consumed_ = 0;
  uint64_t reported_ = 0;
};

}  // namespace weft::ib
