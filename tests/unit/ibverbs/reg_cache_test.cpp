// The registration cache against a fake registrar that counts calls: hits for
// covered ranges, page rounding, LRU eviction that skips held regions, and the
// invalidation rule (weftMemFree -> invalidate).
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "transports/ibverbs/reg_cache.h"

namespace weft::ib {
namespace {

struct Fake {
  int regs = 0, deregs = 0;
  std::set<void*> live;
  uintptr_t next = 1;
  Registrar registrar() {
    return {[this](uintptr_t, size_t, Region* r) {
              ++regs;
              r->handle = reinterpret_cast<void*>(next++);
              r->lkey = r->rkey = static_cast<uint32_t>(regs);
              live.insert(r->handle);
              return Status::Ok();
            },
            [this](const Region& r) {
              ++deregs;
              EXPECT_EQ(live.erase(r.handle), 1u) << "deregistered twice or never registered";
            }};
  }
};

const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }

TEST(RegCache, CoveredRangesHitAndRegistrationIsPageAligned) {
  Fake f;
  RegCache c(f.registrar(), 1 << 30);
  Region r;
  ASSERT_TRUE(c.acquire(at(0x10010), 0x3000, &r).ok());
  EXPECT_EQ(r.base, 0x10000u);
  EXPECT_EQ(r.bytes, 0x4000u);
  c.release(r);
  Region r2;
  ASSERT_TRUE(c.acquire(at(0x11000), 0x100, &r2).ok());  // inside: hit
  EXPECT_EQ(r2.handle, r.handle);
  c.release(r2);
  EXPECT_EQ(f.regs, 1);
  EXPECT_EQ(c.hits(), 1u);
  ASSERT_TRUE(c.acquire(at(0x13f00), 0x200, &r2).ok());  // runs past the end: miss
  c.release(r2);
  EXPECT_EQ(f.regs, 2);
}

TEST(RegCache, EvictsLeastRecentlyUsedButNotHeld) {
  Fake f;
  RegCache c(f.registrar(), 3 * 4096);
  Region a, b, d, e;
  ASSERT_TRUE(c.acquire(at(0x100000), 4096, &a).ok());  // held throughout
  ASSERT_TRUE(c.acquire(at(0x200000), 4096, &b).ok());
  c.release(b);
  ASSERT_TRUE(c.acquire(at(0x300000), 4096, &d).ok());
  c.release(d);
  ASSERT_TRUE(c.acquire(at(0x400000), 4096, &e).ok());  // over capacity: b goes
  c.release(e);
  EXPECT_EQ(f.deregs, 1);
  EXPECT_EQ(f.live.count(b.handle), 0u);
  EXPECT_EQ(f.live.count(a.handle), 1u);
  EXPECT_LE(c.bytes(), 3u * 4096);
  c.release(a);
}

TEST(RegCache, InvalidateDropsOverlappingRegionsAndDefersHeldOnes) {
  Fake f;
  RegCache c(f.registrar(), 1 << 30);
  Region a, b;
  ASSERT_TRUE(c.acquire(at(0x100000), 8192, &a).ok());
  c.release(a);
  ASSERT_TRUE(c.acquire(at(0x200000), 4096, &b).ok());  // held
  c.invalidate(at(0x101000), 16);                       // a byte of a
  EXPECT_EQ(f.deregs, 1);
  c.invalidate(at(0x200000), 4096);  // b is held: deregistered on release
  EXPECT_EQ(f.deregs, 1);
  EXPECT_EQ(c.regions(), 0u);
  Region again;
  ASSERT_TRUE(c.acquire(at(0x200000), 4096, &again).ok());  // a fresh registration
  EXPECT_NE(again.handle, b.handle);
  c.release(b);
  EXPECT_EQ(f.deregs, 2);
  c.release(again);
  c.clear();
  EXPECT_TRUE(f.live.empty());
}

TEST(RegCache, InvalidateAllReachesEveryLiveCache) {
  // weftMemFree cannot know which links registered a buffer: it asks them all.
  Fake f;
  auto a = std::make_unique<RegCache>(f.registrar(), 1 << 30);
  RegCache b(f.registrar(), 1 << 30);
  Region r;
  ASSERT_TRUE(a->acquire(at(0x40000), 0x1000, &r).ok());
  a->release(r);
  ASSERT_TRUE(b.acquire(at(0x40800), 0x100, &r).ok());
  b.release(r);
  ASSERT_TRUE(b.acquire(at(0x90000), 0x100, &r).ok());  // elsewhere: stays
  b.release(r);
  RegCache::invalidate_all(at(0x40000), 0x2000);
  EXPECT_EQ(a->regions(), 0u);
  EXPECT_EQ(b.regions(), 1u);
  EXPECT_EQ(f.deregs, 2);
  a.reset();  // a destroyed cache is no longer asked
  RegCache::invalidate_all(at(0x90000), 0x10);
  EXPECT_EQ(b.regions(), 0u);
}

TEST(RegCache, RegistrationFailurePropagates) {
  Registrar r{[](uintptr_t, size_t, Region*) { return Error(weftSystemError, "ibv_reg_mr: ENOMEM"); },
              [](const Region&) {}};
  RegCache c(r, 1 << 20);
  Region x;
  Status st = c.acquire(at(0x1000), 10, &x);
  EXPECT_EQ(st.code(), weftSystemError);
  EXPECT_EQ(c.regions(), 0u);
}

}  // namespace
}  // namespace weft::ib
