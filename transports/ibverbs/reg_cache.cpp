#include "transports/ibverbs/reg_cache.h"

#include <mutex>

#include <iterator>
#include <set>

#include "transports/shm/memalloc.h"

namespace weft::ib {
namespace {

// Every live cache, for invalidate_all.
std::mutex& registry_mu() {
  static std::mutex mu;
  return mu;
}
std::set<RegCache*>& registry() {
  static std::set<RegCache*> caches;
  return caches;
}

}  // namespace

RegCache::RegCache(Registrar r, size_t capacity, size_t page)
    : r_(std::move(r)), capacity_(capacity), page_(page) {
  // weftMemFree tells every cache before it unmaps a region.
  static std::once_flag hooked;
  std::call_once(hooked, [] { shm::add_free_hook(&RegCache::invalidate_all); });
  std::lock_guard<std::mutex> l(registry_mu());
  registry().insert(this);
}

RegCache::~RegCache() {
  {
    std::lock_guard<std::mutex> l(registry_mu());
    registry().erase(this);
  }
  clear();
}

void RegCache::invalidate_all(const void* addr, size_t len) {
  std::lock_guard<std::mutex> l(registry_mu());
  for (RegCache* c : registry()) c->invalidate(addr, len);
}

Status RegCache::acquire(const void* addr, size_t len, Region* out) {
  std::lock_guard<std::mutex> l(mu_);
  uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  uintptr_t end = a + (len == 0 ? 1 : len);
  // The region starting at or before a, if it reaches end, covers it.
  auto it = by_base_.upper_bound(a);
  if (it != by_base_.begin()) {
    --it;
    Entry& e = it->second;
    if (e.region.base + e.region.bytes >= end) {
      ++hits_;
      ++e.holds;
      lru_.splice(lru_.begin(), lru_, e.lru);
      *out = e.region;
      return Status::Ok();
    }
  }
  ++misses_;
  uintptr_t base = a / page_ * page_;
  size_t bytes = (end + page_ - 1) / page_ * page_ - base;
  Region r;
  WEFT_TRY(r_.reg(base, bytes, &r));
  r.base = base;
  r.bytes = bytes;
  // A new region may cover older, smaller ones; those stay until evicted or
  // invalidated (they may be held). Same base: replace the unheld one.
  auto same = by_base_.find(base);
  if (same != by_base_.end()) {
    if (same->second.holds > 0) {
      same->second.stale = true;
      stale_.emplace(base, same->second);
      lru_.erase(same->second.lru);
      bytes_ -= same->second.region.bytes;
      by_base_.erase(same);
    } else {
      drop(same);
    }
  }
  lru_.push_front(base);
  Entry e{r, 1, false, lru_.begin()};
  by_base_.emplace(base, e);
  bytes_ += bytes;
  evict();
  *out = r;
  return Status::Ok();
}

void RegCache::release(const Region& r) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = by_base_.find(r.base);
  if (it != by_base_.end() && it->second.region.handle == r.handle) {
    if (it->second.holds > 0) --it->second.holds;
    evict();
    return;
  }
  auto [lo, hi] = stale_.equal_range(r.base);
  for (auto st = lo; st != hi; ++st)
    if (st->second.region.handle == r.handle) {
      if (--st->second.holds <= 0) {
        r_.dereg(st->second.region);
        stale_.erase(st);
      }
      return;
    }
}

void RegCache::drop(std::map<uintptr_t, Entry>::iterator it) {
  r_.dereg(it->second.region);
  bytes_ -= it->second.region.bytes;
  lru_.erase(it->second.lru);
  by_base_.erase(it);
}

void RegCache::evict() {
  // Least recently used first; held regions are skipped. drop() erases only
  // the entry before `pos`, so `pos` stays valid.
  auto pos = lru_.end();
  while (bytes_ > capacity_ && pos != lru_.begin()) {
    auto cur = std::prev(pos);
    auto it = by_base_.find(*cur);
    if (it->second.holds > 0) {
      pos = cur;
      continue;
    }
    drop(it);
  }
}

void RegCache::invalidate(const void* addr, size_t len) {
  std::lock_guard<std::mutex> l(mu_);
  uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  uintptr_t end = a + (len == 0 ? 1 : len);
  for (auto it = by_base_.begin(); it != by_base_.end();) {
    const Region& r = it->second.region;
    if (r.base >= end) break;
    if (r.base + r.bytes <= a) {
      ++it;
      continue;
    }
    auto next = std::next(it);
    if (it->second.holds > 0) {
      it->second.stale = true;
      lru_.erase(it->second.lru);
      bytes_ -= r.bytes;
      stale_.emplace(it->first, it->second);
      by_base_.erase(it);
    } else {
      drop(it);
    }
    it = next;
  }
}

void RegCache::clear() {
  std::lock_guard<std::mutex> l(mu_);
  clear_locked();
}

void RegCache::clear_locked() {
  while (!by_base_.empty()) drop(by_base_.begin());
  for (auto& [base, e] : stale_) r_.dereg(e.region);
  stale_.clear();
}

}  // namespace weft::ib
