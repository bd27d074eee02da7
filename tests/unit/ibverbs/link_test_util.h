// What the verbs link tests share: a small ring (every message crosses many
// slots), byte patterns, and a receive that moves both links until done.
#pragma once

#include <vector>

#include "transports/ibverbs/ib_link.h"

namespace weft::ib::testing {

inline LinkOptions small_ring() {
  LinkOptions o;
  o.slots = 4;
  o.slot_bytes = 256;  // 192 bytes of payload per slot
  o.credit_batch = 2;
  return o;
}

inline std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(i * 131 + seed);
  return v;
}

// Polls `to` for a whole message while moving both links; an error if it stalls.
inline Status receive(IbLink& to, IbLink& from, transport::RecvOp& op) {
  for (int spins = 0; spins < 100000; ++spins) {
    bool complete = false;
    WEFT_TRY(to.poll_recv(op, &complete));
    if (complete) return Status::Ok();
    from.progress();
    to.progress();
  }
  return Error(weftTimeout, "receive stalled at %zu of %zu bytes", op.done, op.bytes);
}

}  // namespace weft::ib::testing
