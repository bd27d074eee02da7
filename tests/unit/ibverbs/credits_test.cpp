// Credit accounting: the sender never has more writes in flight than the
// receiver has slots, returns are batched but never leave a sender stalled,
// and stale or impossible returns are handled.
#include <gtest/gtest.h>

#include <deque>

#include "transports/ibverbs/credits.h"

namespace weft::ib {
namespace {

TEST(Credits, SenderStopsAtZeroAndResumesOnReturn) {
  SenderCredits s(4);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(s.take());
  EXPECT_FALSE(s.take());
  EXPECT_EQ(s.available(), 0u);
  EXPECT_TRUE(s.on_returned(2));
  EXPECT_EQ(s.available(), 2u);
  EXPECT_TRUE(s.on_returned(1));  // older total: ignored
  EXPECT_EQ(s.available(), 2u);
  EXPECT_FALSE(s.on_returned(5));  // more than was ever used: protocol error
}

TEST(Credits, ReceiverBatchesReturnsButNeverStrandsTheSender) {
  ReceiverCredits r(8, 4);
  r.consumed();
  EXPECT_EQ(r.to_return(), 0u);
  for (int i = 0; i < 3; ++i) r.consumed();
  EXPECT_EQ(r.to_return(), 4u);
  r.returned(4);
  EXPECT_EQ(r.to_return(), 0u);
  ReceiverCredits tiny(2, 16);  // batch above the ring: clamped
  tiny.consumed();
  EXPECT_EQ(tiny.to_return(), 0u);
  tiny.consumed();
  EXPECT_EQ(tiny.to_return(), 2u);
}

// A sender and receiver exchanging 10,000 messages with random consumption
// never overrun the ring and never deadlock.
TEST(Credits, SimulatedExchangeNeverOverrunsTheRing) {
  const uint32_t slots = 16;
  SenderCredits s(slots);
  ReceiverCredits r(slots, 5);
  std::deque<int> ring;  // messages written, not yet consumed
  uint64_t sent = 0, received = 0;
  uint32_t x = 12345;
  while (received < 10000) {
    x = x * 1664525u + 1013904223u;
    if ((x >> 28) & 1) {
      if (sent < 10000 && s.take()) {
        ring.push_back(0);
        ++sent;
        ASSERT_LE(ring.size(), slots);
      }
    } else if (!ring.empty()) {
      ring.pop_front();
      ++received;
      r.consumed();
    }
    if (uint64_t t = r.to_return()) {
      ASSERT_TRUE(s.on_returned(t));
      r.returned(t);
    }
    // Deadlock check: if the sender cannot send, the receiver must have work.
    if (sent < 10000 && s.available() == 0) {
      ASSERT_FALSE(ring.empty());
    }
  }
  EXPECT_EQ(sent, 10000u);
}

}  // namespace
}  // namespace weft::ib
