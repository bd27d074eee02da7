// weftMemAlloc buffers: each allocation is its own memfd, mapped shared. A peer
// on the same host maps it through /proc/<pid>/fd/<fd> the first time a message
// points into it, and from then on reads it in place: no copies at all.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <list>

#include "base/status.h"

namespace weft::shm {

Status mem_alloc(size_t bytes, void** out);
// Calls every free hook with the region, then unmaps it.
Status mem_free(void* ptr);
// Registration caches (ibverbs memory regions, ...) drop what they hold of a
// region before it goes: they add a hook once; weftMemFree names no transport.
using FreeHook = void (*)(const void* base, size_t bytes);
void add_free_hook(FreeHook hook);

struct Region {
  uint64_t base = 0;
  uint64_t size = 0;
  uint64_t ino = 0;
  int fd = -1;
};
// The region holding [addr, addr + bytes), if the whole range lies in one.
bool find_region(const void* addr, size_t bytes, Region* out);

// A receiver's cache of peer regions it has mapped (read-only). Bounded: the
// least recently used mapping is dropped when full. A region freed by its owner
// is recognized by its inode when the fd number is reused.
class PeerMappings {
 public:
  explicit PeerMappings(pid_t pid) : pid_(pid) {}
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;
  ~PeerMappings();

  // Local address of the peer's bytes at `addr`, or nullptr if the region
  // cannot be mapped (the caller then falls back to cross-memory attach).
  const void* map(const Region& r, uint64_t addr);

 private:
  struct Entry {
    Region region;
    void* local;
  };
  static constexpr size_t kMaxEntries = 64;
  pid_t pid_;
  std::list<Entry> entries_;  // most recently used first
};

}  // namespace weft::shm
