// The FIFO's choice between cached and streaming stores (transports/shm/slot_copy.h),
// fed with timings worked out by hand: the sender's, and what the reader publishes.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "transports/shm/slot_copy.h"

namespace weft::shm {
namespace {

TEST(SlotCopy, FixedModesNeverChange) {
  SlotCopy cached(SlotCopy::Mode::Cached, 45), streaming(SlotCopy::Mode::Streaming, 45);
  for (int i = 0; i < 200; ++i) {
    EXPECT_FALSE(cached.next_streams());
    EXPECT_TRUE(streaming.next_streams());
  }
}

TEST(SlotCopy, CopiesTheSlotInEveryMode) {
  std::vector<unsigned char> src(32768), dst(32768);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 17 + 1);
  for (auto mode : {SlotCopy::Mode::Auto, SlotCopy::Mode::Cached, SlotCopy::Mode::Streaming}) {
    SlotCopy c(mode, 45);
    for (int slot = 0; slot < 3; ++slot) {  // in Auto: one cached, one streamed, then the choice
      std::memset(dst.data(), 0, dst.size());
      c.copy(dst.data(), src.data(), src.size());
      ASSERT_EQ(src, dst) << "mode " << static_cast<int>(mode) << ", slot " << slot;
    }
  }
}

// Times in ticks per byte, recorded for 1,000-byte copies. Cached stores at 1.0 and
// streaming ones at 0.6: cached run at 60% of streaming's speed, over 45%.
// Streaming wins once the cached average exceeds 0.6 / 0.45 = 1.333. The average
// moves by 1/8 of each sample's distance, a sample counting at most twice the
// average: slow samples of 3.0 count as 2.0, 2.25, 2.53125 and take it 1.0 -> 1.125
// -> 1.265625 -> 1.423828 (streaming after the third); fast ones of 1.0 bring it
// back 1.370850 -> 1.324493 (cached after the second).
TEST(SlotCopy, StreamsWhileCachedStoresRunUnderThePercentOfStreamingOnes) {
  SlotCopy c(SlotCopy::Mode::Auto, 45);
  EXPECT_FALSE(c.next_streams());  // slot 0: cached, to measure it
  c.record(false, 1000, 1000);
  EXPECT_TRUE(c.next_streams());   // slot 1: streaming, to measure it
  c.record(true, 600, 1000);
  EXPECT_FALSE(c.streaming());
  c.record(false, 3000, 1000);
  c.record(false, 3000, 1000);
  EXPECT_FALSE(c.streaming()) << "after two slow cached copies (average 1.27)";
  c.record(false, 3000, 1000);
  EXPECT_TRUE(c.streaming()) << "after three (average 1.42)";
  c.record(false, 1000, 1000);
  EXPECT_TRUE(c.streaming()) << "after one fast probe (average 1.37)";
  c.record(false, 1000, 1000);
  EXPECT_FALSE(c.streaming()) << "after two (average 1.32)";
}

TEST(SlotCopy, OnePreemptedCopyDoesNotFlipTheChoice) {
  SlotCopy c(SlotCopy::Mode::Auto, 45);
  c.record(false, 1000, 1000);
  c.record(true, 600, 1000);
  c.record(false, 5'000'000, 1000);  // counted as 2.0: average 1.125, under 1.333
  EXPECT_FALSE(c.streaming());
}

TEST(SlotCopy, ProbesTheOtherKindEverySixtyFourthSlot) {
  SlotCopy c(SlotCopy::Mode::Auto, 45);
  EXPECT_FALSE(c.next_streams());
  c.record(false, 3000, 1000);
  EXPECT_TRUE(c.next_streams());
  c.record(true, 600, 1000);  // cached at 20% of streaming's speed: stream
  ASSERT_TRUE(c.streaming());
  std::vector<int> cached_slots;
  for (int slot = 2; slot < 200; ++slot)
    if (!c.next_streams()) cached_slots.push_back(slot);
  EXPECT_EQ((std::vector<int>{64, 128, 192}), cached_slots);
}

TEST(TickAverage, FirstSampleSetsItThenEachMovesItAnEighthAtMostTwiceTheAverage) {
  TickAverage a;
  EXPECT_EQ(0.0, a.value());
  a.add(500, 0);  // nothing copied: no sample
  EXPECT_EQ(0.0, a.value());
  a.add(2000, 1000);
  EXPECT_DOUBLE_EQ(2.0, a.value());
  a.add(1000, 1000);  // 2 + (1 - 2) / 8
  EXPECT_DOUBLE_EQ(1.875, a.value());
  a.add(1'000'000, 1000);  // counted as 3.75: 1.875 + 1.875 / 8
  EXPECT_DOUBLE_EQ(2.109375, a.value());
}

// A cache-hot source (a 2 MiB all-reduce): the sender's cached copies at 0.30
// ticks per byte, its streamed ones at 0.06, 20% of the time (streaming alone
// would win). The reader publishes 0.10 for cached slots and 0.60 for streamed
// ones (it fetches them from memory): slower ends 0.30 against 0.60, cached.
TEST(SlotCopy, AReaderSlowedByStreamedSlotsKeepsThemCached) {
  SlotCopy c(SlotCopy::Mode::Auto, 45);
  c.record(false, 300, 1000);
  c.record(true, 60, 1000);
  ASSERT_TRUE(c.streaming()) << "the sender's timings alone";
  c.reader_costs(0.10, 0.60);
  EXPECT_FALSE(c.streaming());
}

// A slow spell: cached copies at 2.5 ticks per byte, streamed ones 0.06, the
// reader 0.10 and 0.60: 0.60 is 24% of 2.5, under 45%: stream.
TEST(SlotCopy, ASlowSpellStreamsAlthoughTheReaderPaysForIt) {
  SlotCopy c(SlotCopy::Mode::Auto, 45);
  c.reader_costs(0.10, 0.60);
  c.record(false, 2500, 1000);
  EXPECT_FALSE(c.streaming()) << "the sender has timed no streamed copy yet";
  c.record(true, 60, 1000);
  EXPECT_TRUE(c.streaming());
}

// The reader's figures count once it has read a slot of each kind: with only a
// cached figure (0.10) the sender's own timings (1.0 and 0.4: 40%) decide.
TEST(SlotCopy, AReadersCostCountsOnceItHasReadBothKinds) {
  SlotCopy c(SlotCopy::Mode::Auto, 45);
  c.record(false, 1000, 1000);
  c.record(true, 400, 1000);
  c.reader_costs(0.10, 0);
  EXPECT_TRUE(c.streaming());
  c.reader_costs(0.10, 0.50);  // slower ends 1.0 and 0.5: 50%, over 45
  EXPECT_FALSE(c.streaming());
}

}  // namespace
}  // namespace weft::shm
