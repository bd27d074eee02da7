#include "transports/shm/memalloc.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>
#include <algorithm>
#include <string>

#include "base/log.h"

namespace weft::shm {
namespace {

std::mutex g_mu;
std::map<uint64_t, Region>& regions() {  // keyed by base address
  static auto* m = new std::map<uint64_t, Region>;
  return *m;
}

}  // namespace

Status mem_alloc(size_t bytes, void** out) {
  if (out == nullptr) return Error(weftInvalidArgument, "weftMemAlloc: ptr is NULL");
  if (bytes == 0) return Error(weftInvalidArgument, "weftMemAlloc: size is 0");
  int fd = memfd_create("weft-mem", MFD_CLOEXEC);
  if (fd < 0) return SysError(errno, "weftMemAlloc: memfd_create");
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    return SysError(err, "weftMemAlloc: ftruncate to %zu bytes", bytes);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    close(fd);
    return SysError(err, "weftMemAlloc: mmap of %zu bytes", bytes);
  }
  struct stat st;
  fstat(fd, &st);
  Region r{reinterpret_cast<uint64_t>(p), bytes, static_cast<uint64_t>(st.st_ino), fd};
  std::lock_guard<std::mutex> lock(g_mu);
  regions()[r.base] = r;
  *out = p;
  return Status::Ok();
}

std::mutex g_hooks_mu;
std::vector<FreeHook>& free_hooks() {
  static auto* h = new std::vector<FreeHook>;
  return *h;
}

void add_free_hook(FreeHook hook) {
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  if (std::find(free_hooks().begin(), free_hooks().end(), hook) == free_hooks().end()) free_hooks().push_back(hook);
}

Status mem_free(void* ptr) {
  if (ptr == nullptr) return Status::Ok();
  Region r;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = regions().find(reinterpret_cast<uint64_t>(ptr));
    if (it == regions().end())
      return Error(weftInvalidArgument, "weftMemFree: %p was not returned by weftMemAlloc", ptr);
    r = it->second;
    regions().erase(it);
  }
  {
    std::lock_guard<std::mutex> lock(g_hooks_mu);
    for (FreeHook h : free_hooks()) h(ptr, r.size);
  }
  munmap(ptr, r.size);
  close(r.fd);
  return Status::Ok();
}

bool find_region(const void* addr, size_t bytes, Region* out) {
  uint64_t a = reinterpret_cast<uint64_t>(addr);
  std::lock_guard<std::mutex> lock(g_mu);
  auto& m = regions();
  if (m.empty()) return false;
  auto it = m.upper_bound(a);
  if (it == m.begin()) return false;
  --it;
  const Region& r = it->second;
  if (a + bytes > r.base + r.size) return false;
  *out = r;
  return true;
}

PeerMappings::~PeerMappings() {
  for (auto& e : entries_) munmap(e.local, e.region.size);
}

const void* PeerMappings::map(const Region& r, uint64_t addr) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->region.base == r.base && it->region.ino == r.ino && it->region.size == r.size) {
      entries_.splice(entries_.begin(), entries_, it);
      return static_cast<const unsigned char*>(it->local) + (addr - r.base);
    }
  }
  std::string path = "/proc/" + std::to_string(pid_) + "/fd/" + std::to_string(r.fd);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    WEFT_INFO(TRANSPORT, "cannot open peer buffer %s: %s; reading it with cross-memory attach",
              path.c_str(), strerror(errno));
    return nullptr;
  }
  struct stat st;
  // The file must be as large as the region said: a mapping past its end faults
  // (SIGBUS) when read.
  bool same = fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_ino) == r.ino && st.st_size >= 0 &&
              static_cast<uint64_t>(st.st_size) >= r.size;
  void* p = same ? mmap(nullptr, r.size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (p == MAP_FAILED) return nullptr;
  // Drop stale mappings of the same address range (the peer freed and reallocated).
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->region.base == r.base) {
      munmap(it->local, it->region.size);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  if (entries_.size() >= kMaxEntries) {
    munmap(entries_.back().local, entries_.back().region.size);
    entries_.pop_back();
  }
  entries_.push_front({r, p});
  return static_cast<const unsigned char*>(p) + (addr - r.base);
}

}  // namespace weft::shm
