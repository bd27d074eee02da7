#include "exec/buffer_kind.h"

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace weft::exec {
namespace {

// The driver API's cuPointerGetAttribute and the values we ask for
// (cuda.h: CU_POINTER_ATTRIBUTE_MEMORY_TYPE, _DEVICE_ORDINAL; CU_MEMORYTYPE_DEVICE).
using PointerAttribute = int (*)(void* data, int attribute, uintptr_t ptr);
constexpr int kAttrMemoryType = 2;
constexpr int kAttrDeviceOrdinal = 9;
constexpr unsigned kMemoryTypeDevice = 2;

std::atomic<PointerAttribute> g_query{nullptr};
std::atomic<int64_t> g_next_look_ns{0};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

PointerAttribute driver() {
  PointerAttribute q = g_query.load(std::memory_order_acquire);
  if (q != nullptr) return q;
  int64_t now = now_ns();
  if (now < g_next_look_ns.load(std::memory_order_relaxed)) return nullptr;
  g_next_look_ns.store(now + 1'000'000'000, std::memory_order_relaxed);
  // RTLD_NOLOAD: a handle only if the application already loaded the driver.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return nullptr;
  q = reinterpret_cast<PointerAttribute>(dlsym(lib, "cuPointerGetAttribute"));
  g_query.store(q, std::memory_order_release);  // the handle stays: the driver is never unloaded under us
  return q;
}

}  // namespace

BufferKind buffer_kind(const void* p) {
  BufferKind k;
  PointerAttribute q = driver();
  if (q == nullptr || p == nullptr) return k;
  unsigned type = 0;
  // Ordinary host memory is unknown to the driver: an error, so host.
  if (q(&type, kAttrMemoryType, reinterpret_cast<uintptr_t>(p)) != 0 || type != kMemoryTypeDevice) return k;
  k.device = true;
  if (q(&k.gpu, kAttrDeviceOrdinal, reinterpret_cast<uintptr_t>(p)) != 0) k.gpu = -1;
  return k;
}

}  // namespace weft::exec
