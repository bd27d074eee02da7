// The staging of calls on device memory without a GPU: where a call's ranges go
// in the pinned slot (StagingLayout), and the slots' reuse by call number, their
// cap and their deadline (DeviceStaging) over a driver table of plain functions.
#include <cstdlib>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "comm/device_staging.h"
#include "comm/staging_layout.h"

namespace weft {
namespace {

// Before any parameter is read: at most two slots.
const bool kTwoSlots = setenv("WEFT_DEVICE_STAGING_SLOTS", "2", 1) == 0;

// Overlapping ranges share a segment; ranges that only touch do not (two
// cuMemAlloc'd buffers can be adjacent, and one copy may not span both: a lent
// H200 refused a 512 MiB all-reduce whose send and receive buffers touched).
TEST(StagingLayout, OverlappingRangesShareASegmentTouchingAndDisjointOnesAreAlignedApart) {
  std::vector<unsigned char> dev(10000);
  unsigned char* d = dev.data();
  StagingLayout l;
  l.add(d + 0, 100, true, false);      // read
  l.add(d + 100, 50, false, true);     // written, touching the first: a segment of its own
  l.add(d + 1000, 300, false, true);   // written
  l.add(d + 1200, 200, true, false);   // read, overlapping the last: one segment 1000..1400
  l.add(d + 5000, 0, true, true);      // empty: not staged
  EXPECT_EQ(l.place(), 256u + 256u + 512u);  // 100 -> 256, 50 -> 256, 400 -> 512

  std::vector<unsigned char> slot(1024);
  unsigned char* s = slot.data();
  EXPECT_EQ(l.host(s, d + 0), s + 0);
  EXPECT_EQ(l.host(s, d + 100), s + 256);
  EXPECT_EQ(l.host(s, d + 120), s + 276);
  EXPECT_EQ(l.host(s, d + 1000), s + 512);
  EXPECT_EQ(l.host(s, d + 1399), s + 512 + 399);
  EXPECT_EQ(l.host(s, d + 5000), nullptr);

  struct Copy {
    void* dev;
    size_t bytes, at;
  };
  std::vector<Copy> in, out;
  ASSERT_TRUE(l.each(true, [&](void* p, size_t b, size_t at) {
    in.push_back({p, b, at});
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(l.each(false, [&](void* p, size_t b, size_t at) {
    out.push_back({p, b, at});
    return Status::Ok();
  }).ok());
  // In: the first range and the merged one (whole); out: the second and the merged one.
  ASSERT_EQ(in.size(), 2u);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(in[0].dev, d);
  EXPECT_EQ(in[0].bytes, 100u);
  EXPECT_EQ(in[1].dev, d + 1000);
  EXPECT_EQ(in[1].bytes, 400u);
  EXPECT_EQ(in[1].at, 512u);
  EXPECT_EQ(out[0].dev, d + 100);
  EXPECT_EQ(out[0].bytes, 50u);
  EXPECT_EQ(out[1].dev, d + 1000);
}

TEST(StagingLayout, ReceiveOnlySegmentsAreNotCopiedIn) {
  std::vector<unsigned char> dev(4096);
  StagingLayout l;
  l.add(dev.data(), 64, true, false);
  l.add(dev.data() + 1024, 64, false, true);
  l.place();
  int ins = 0, outs = 0;
  ASSERT_TRUE(l.each(true, [&](void*, size_t, size_t) { return ++ins, Status::Ok(); }).ok());
  ASSERT_TRUE(l.each(false, [&](void*, size_t, size_t) { return ++outs, Status::Ok(); }).ok());
  EXPECT_EQ(ins, 1);
  EXPECT_EQ(outs, 1);
}

// A chunk of an in-place all-gather at 3 ranks: its piece of the rank's own
// block goes in first, then the three received pieces side by side, each where
// put() says, overlapping device ranges included (not merged).
TEST(StagingLayout, PutPlacesEachRangeWhereTheCallerSays) {
  std::vector<unsigned char> dev(3 * 1000);
  unsigned char* d = dev.data();
  StagingLayout l;
  const size_t piece = 40, recv_at = 256;
  l.put(d + 1000 + 200, piece, true, false, 0);  // rank 1's block, elements 200..240
  for (size_t b = 0; b < 3; ++b) l.put(d + b * 1000 + 200, piece, false, true, recv_at + b * piece);
  l.put(d, 0, true, true, 9999);  // empty: not staged
  EXPECT_EQ(l.place(), recv_at + 3 * piece);
  std::vector<std::pair<void*, size_t>> in, out;
  ASSERT_TRUE(l.each(true, [&](void* p, size_t b, size_t at) {
    EXPECT_EQ(b, piece);
    in.emplace_back(p, at);
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(l.each(false, [&](void* p, size_t b, size_t at) {
    EXPECT_EQ(b, piece);
    out.emplace_back(p, at);
    return Status::Ok();
  }).ok());
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0], std::make_pair(static_cast<void*>(d + 1200), size_t{0}));
  ASSERT_EQ(out.size(), 3u);
  for (size_t b = 0; b < 3; ++b)
    EXPECT_EQ(out[b], std::make_pair(static_cast<void*>(d + b * 1000 + 200), recv_at + b * piece)) << b;
}

// Pinned memory as plain memory, counted.
int g_allocs = 0, g_frees = 0;
int host_alloc(void** p, size_t bytes, unsigned) {
  *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  ++g_allocs;
  return *p == nullptr ? 2 : 0;
}
int host_free(void* p) {
  std::free(p);
  ++g_frees;
  return 0;
}
int device_pointer(exec::cuda::DevicePtr* d, void* p, unsigned) {
  *d = reinterpret_cast<exec::cuda::DevicePtr>(p);
  return 0;
}
exec::cuda::Api driver() {
  exec::cuda::Api d{};
  d.host_alloc = host_alloc;
  d.host_free = host_free;
  d.host_device_pointer = device_pointer;
  return d;
}

TEST(DeviceStaging, SlotsAreReusedOnceTheStreamFreesThemCappedAndAbandonedOnesNever) {
  ASSERT_TRUE(kTwoSlots);
  const exec::cuda::Api d = driver();
  g_allocs = g_frees = 0;
  void* abandoned = nullptr;
  {
    DeviceStaging staging;
    staging.set_timeout_ms(100);
    DeviceStaging::Slot *a = nullptr, *b = nullptr, *c = nullptr;
    ASSERT_TRUE(staging.take(d, 1000, "test", &a).ok());
    EXPECT_EQ(a->gen, 1u);
    EXPECT_GE(a->capacity, 1000u);
    // a's call is not finished: the next call gets a second slot.
    ASSERT_TRUE(staging.take(d, 1000, "test", &b).ok());
    EXPECT_NE(a, b);
    // The stream frees a (call 1): it is reused for call 2.
    a->raise(DeviceStaging::kFree, 1);
    ASSERT_TRUE(staging.take(d, 500, "test", &c).ok());
    EXPECT_EQ(c, a);
    EXPECT_EQ(c->gen, 2u);
    // Both slots busy, at the cap of two: a third call waits, here past its deadline.
    DeviceStaging::Slot* none = nullptr;
    Status st = staging.take(d, 10, "test", &none);
    EXPECT_EQ(st.code(), weftTimeout);
    EXPECT_NE(st.message().find("WEFT_DEVICE_STAGING_SLOTS"), std::string::npos) << st.message();
    // A slot freed but too small is replaced by a larger one.
    b->raise(DeviceStaging::kFree, 1);
    DeviceStaging::Slot* big = nullptr;
    ASSERT_TRUE(staging.take(d, 1 << 20, "test", &big).ok());
    EXPECT_GE(big->capacity, size_t{1} << 20);
    EXPECT_EQ(big->gen, 1u);
    // An abandoned slot (a stream step failed) is never handed out again, even
    // when its flag says free.
    big->abandoned = true;
    big->raise(DeviceStaging::kFree, 1);
    c->raise(DeviceStaging::kFree, 2);
    DeviceStaging::Slot* again = nullptr;
    ASSERT_TRUE(staging.take(d, 10, "test", &again).ok());
    EXPECT_EQ(again, c);
    again->raise(DeviceStaging::kFree, again->gen);
    EXPECT_EQ(g_allocs, 3);
    abandoned = big->block;
  }
  // The destructor frees what the streams released; the abandoned slot stays
  // (a stream may still read it), so the test frees it here.
  EXPECT_EQ(g_frees, 2);
  host_free(abandoned);
}

TEST(DeviceStaging, FlagsCompareCyclicallyAsTheDriversWait) {
  const exec::cuda::Api d = driver();
  DeviceStaging staging;
  DeviceStaging::Slot* s = nullptr;
  ASSERT_TRUE(staging.take(d, 64, "test", &s).ok());
  s->raise(DeviceStaging::kDone, 0xfffffffeu);
  EXPECT_TRUE(s->reached(DeviceStaging::kDone, 0xfffffffeu));
  EXPECT_FALSE(s->reached(DeviceStaging::kDone, 0xffffffffu));
  EXPECT_FALSE(s->reached(DeviceStaging::kDone, 2u));  // past the wrap
  s->raise(DeviceStaging::kDone, 1u);
  EXPECT_TRUE(s->reached(DeviceStaging::kDone, 0xffffffffu));
  EXPECT_TRUE(s->reached(DeviceStaging::kDone, 1u));
  s->raise(DeviceStaging::kFree, s->gen);
}

}  // namespace
}  // namespace weft
