// Memory registration cache. Registering memory with the NIC (ibv_reg_mr) pins
// pages and costs tens of microseconds per call, so regions are registered
// once and reused across calls: a lookup for [addr, addr+len) hits any cached
// region that covers it. Registration is page-aligned (the NIC pins whole
// pages anyway), so neighbouring buffers of one allocation share a region.
//
// The invalidation rule: a cached region stays valid until invalidate() is
// called for any byte of it. weftMemFree reaches invalidate_all() (a free hook, memalloc.h) for the
// buffers it frees (every cache of the process); a cache deregisters all it
// holds when destroyed, with its link. Memory a user frees with
// free()/munmap() and the allocator hands back later at the same address is
// NOT detected: users who recycle buffers between calls must use weftMemAlloc
// (or call weftMemFree-backed buffers), as with NCCL's registration.
//
// The cache holds at most `capacity` bytes; beyond that the least recently
// used regions that no operation holds are deregistered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>

#include "base/status.h"

namespace weft::ib {

struct Region {
  uintptr_t base = 0;
  size_t bytes = 0;
  uint32_t lkey = 0, rkey = 0;
  void* handle = nullptr;  // the ibv_mr, opaque here
};

// What registers and deregisters: ibv_reg_mr/ibv_dereg_mr in the transport,
// a fake in tests.
struct Registrar {
  std::function<Status(uintptr_t base, size_t bytes, Region* out)> reg;
  std::function<void(const Region&)> dereg;
};

class RegCache {
 public:
  // Thread-safe: the executor's thread registers while weftMemFree, on the
  // caller's, invalidates.
  RegCache(Registrar r, size_t capacity, size_t page = 4096);
  ~RegCache();
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  // A region covering [addr, addr+len), registering one if needed. The region
  // is held (not evicted) until release().
  Status acquire(const void* addr, size_t len, Region* out);
  void release(const Region& r);
  // Drops every region overlapping [addr, addr+len); a held region is
  // deregistered when released.
  void invalidate(const void* addr, size_t len);
  void clear();
  // invalidate() on every live cache of the process.
  static void invalidate_all(const void* addr, size_t len);

  size_t regions() const { std::lock_guard<std::mutex> l(mu_); return by_base_.size(); }
  size_t bytes() const { std::lock_guard<std::mutex> l(mu_); return bytes_; }
  uint64_t hits() const { std::lock_guard<std::mutex> l(mu_); return hits_; }
  uint64_t misses() const { std::lock_guard<std::mutex> l(mu_); return misses_; }

 private:
  struct Entry {
    Region region;
    int holds = 0;
    bool stale = false;  // invalidated while held
    std::list<uintptr_t>::iterator lru;
  };
  // Callers hold mu_.
  void drop(std::map<uintptr_t, Entry>::iterator it);
  void evict();
  void clear_locked();

  mutable std::mutex mu_;

  Registrar r_;
  size_t capacity_, page_;
  std::map<uintptr_t, Entry> by_base_;  // live regions by base address
  std::multimap<uintptr_t, Entry> stale_;  // invalidated but still held
  std::list<uintptr_t> lru_;            // front: most recently used
  size_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace weft::ib
