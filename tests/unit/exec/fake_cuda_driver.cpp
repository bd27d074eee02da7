// A stand-in for the CUDA driver (built as libcuda.so.1) for machines without a
// GPU. "Device memory" is host memory it handed out (cuMemAlloc) or that
// fake_cuda_mark() named, answered for by cuPointerGetAttributes as the driver
// answers; everything else is "not mine". A stream is a thread that runs its
// queued work (copies, 32-bit flag writes and waits) in order, as the GPU runs a
// stream, so work enqueued on it happens later than the call that enqueued it.
// A test loads it, so weft finds "the driver" loaded as in a CUDA application.
//
// Test controls: fake_cuda_mark, fake_cuda_alloc_touching_pair (two allocations
// side by side), fake_cuda_stream_hold (a held stream runs nothing until
// released), fake_cuda_fail_next (the next call of an entry point fails with
// CUDA_ERROR_INVALID_VALUE). As the driver, a copy may not span two allocations.
//
// Stream capture as the driver's: between cuStreamBeginCapture and
// cuStreamEndCapture the work enqueued on a stream is recorded instead of run,
// and cuGraphLaunch enqueues the recorded work again at each launch.
//
// IPC as the driver's between processes of one host: cuMemAlloc'd memory is a
// memfd mapping, and a handle names the exporter's pid and descriptor, which
// the importer opens through /proc and maps. A host function (cuLaunchHostFunc)
// runs on the stream's thread, in stream order; weft runs its device reductions
// that way on this driver. Every device is one "GPU" per ordinal, each with
// peer access to the others.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kSuccess = 0, kInvalidValue = 1;

struct Range {
  uintptr_t base;
  size_t bytes;
  int gpu;
  int fd = -1;            // cuMemAlloc'd: its memfd (exported by cuIpcGetMemHandle)
  bool imported = false;  // cuIpcOpenMemHandle'd: unmapped by cuIpcCloseMemHandle
};
// CUipcMemHandle's 64 bytes here.
struct Handle {
  uint32_t magic;
  int32_t pid, fd, gpu;
  uint64_t bytes;
  char pad[40];
};
static_assert(sizeof(Handle) == 64);
constexpr uint32_t kHandleMagic = 0x77656674;
std::mutex g_mu;
std::vector<Range> g_device;  // guarded by g_mu
std::string g_fail_next;      // guarded by g_mu

bool failing(const char* fn) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_fail_next != fn) return false;
  g_fail_next.clear();
  return true;
}

// A captured graph (CUgraph) and its instantiation (CUgraphExec) alike.
struct Graph {
  std::vector<std::function<void()>> work;
};

class Stream {
 public:
  Stream() : worker_([this] { run(); }) { worker_.detach(); }
  void enqueue(std::function<void()> work) {
    std::lock_guard<std::mutex> lock(mu_);
    if (capture_ != nullptr) {
      capture_->work.push_back(std::move(work));
      return;
    }
    queue_.push_back(std::move(work));
    cv_.notify_all();
  }
  bool begin_capture() {
    std::lock_guard<std::mutex> lock(mu_);
    if (capture_ != nullptr) return false;
    capture_ = new Graph;
    return true;
  }
  Graph* end_capture() {
    std::lock_guard<std::mutex> lock(mu_);
    Graph* g = capture_;
    capture_ = nullptr;
    return g;
  }
  bool capturing() {
    std::lock_guard<std::mutex> lock(mu_);
    return capture_ != nullptr;
  }
  void hold(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = on;
    cv_.notify_all();
  }
  bool idle() {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.empty() && !busy_;
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() && !held_; });
        work = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      work();
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool held_ = false, busy_ = false;
  Graph* capture_ = nullptr;  // being captured into
  std::thread worker_;
};

// Streams live as long as the process (their threads are detached).
Stream* stream_of(void* s) {
  // NULL, CU_STREAM_LEGACY (0x1), CU_STREAM_PER_THREAD (0x2): the default stream.
  static Stream* legacy = new Stream;
  return reinterpret_cast<uintptr_t>(s) <= 2 ? legacy : static_cast<Stream*>(s);
}

}  // namespace

EXPORT void fake_cuda_mark(const void* base, size_t bytes, int gpu) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_device.push_back({reinterpret_cast<uintptr_t>(base), bytes, gpu});
}
// Two allocations of `bytes` that touch, as cuMemAlloc may hand out; kept for
// the life of the process.
EXPORT void* fake_cuda_alloc_touching_pair(size_t bytes) {
  static std::mutex mu;
  static auto* blocks = new std::vector<void*>;  // never destroyed: stays reachable
  void* p = std::aligned_alloc(256, (2 * bytes + 255) / 256 * 256);
  if (p == nullptr) return nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    blocks->push_back(p);
  }
  fake_cuda_mark(p, bytes, 0);
  fake_cuda_mark(static_cast<unsigned char*>(p) + bytes, bytes, 0);
  return p;
}
EXPORT void fake_cuda_stream_hold(void* stream, int on) { stream_of(stream)->hold(on != 0); }
// CU_STREAM_CAPTURE_STATUS_NONE 0, _ACTIVE 1.
EXPORT int cuStreamIsCapturing(void* s, int* status) {
  *status = stream_of(s)->capturing() ? 1 : 0;
  return kSuccess;
}
// As the driver: not on the legacy default stream, nor twice.
EXPORT int cuStreamBeginCapture_v2(void* s, int) {
  if (reinterpret_cast<uintptr_t>(s) <= 2) return 906;  // CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
  return stream_of(s)->begin_capture() ? kSuccess : 900;  // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
}
EXPORT int cuStreamEndCapture(void* s, void** graph) {
  Graph* g = stream_of(s)->end_capture();
  if (g == nullptr) return 901;  // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
  *graph = g;
  return kSuccess;
}
EXPORT int cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
  *exec = new Graph(*static_cast<Graph*>(graph));
  return kSuccess;
}
EXPORT int cuGraphLaunch(void* exec, void* s) {
  for (const auto& work : static_cast<Graph*>(exec)->work) stream_of(s)->enqueue(work);
  return kSuccess;
}
EXPORT int cuGraphExecDestroy(void* exec) {
  delete static_cast<Graph*>(exec);
  return kSuccess;
}
EXPORT int cuGraphDestroy(void* graph) {
  delete static_cast<Graph*>(graph);
  return kSuccess;
}
EXPORT void fake_cuda_fail_next(const char* fn) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_fail_next = fn;
}

// CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2 (CU_MEMORYTYPE_DEVICE 2, 0 for memory the
// driver does not know), _DEVICE_ORDINAL 9.
EXPORT int cuPointerGetAttributes(unsigned count, const int* attributes, void** data, uintptr_t ptr) {
  std::lock_guard<std::mutex> lock(g_mu);
  const Range* found = nullptr;
  for (const Range& r : g_device)
    if (ptr >= r.base && ptr < r.base + r.bytes) found = &r;
  for (unsigned i = 0; i < count; ++i) {
    if (attributes[i] == 2) *static_cast<unsigned*>(data[i]) = found != nullptr ? 2 : 0;
    else if (attributes[i] == 9) *static_cast<int*>(data[i]) = found != nullptr ? found->gpu : -1;
    else return kInvalidValue;
  }
  return kSuccess;
}

EXPORT int cuInit(unsigned) { return kSuccess; }
EXPORT int cuDeviceGetCount(int* n) {
  *n = 1;
  return kSuccess;
}
EXPORT int cuDeviceGet(int* device, int ordinal) {
  *device = ordinal;
  return kSuccess;
}
EXPORT int cuDevicePrimaryCtxRetain(void** ctx, int device) {
  *ctx = reinterpret_cast<void*>(static_cast<uintptr_t>(device) + 0x100);
  return kSuccess;
}
thread_local int t_device = -1;
EXPORT int cuCtxSetCurrent(void* ctx) {
  t_device = ctx == nullptr ? -1 : static_cast<int>(reinterpret_cast<uintptr_t>(ctx) - 0x100);
  return kSuccess;
}
EXPORT int cuCtxGetDevice(int* device) {
  if (t_device < 0) return 201;  // CUDA_ERROR_INVALID_CONTEXT
  *device = t_device;
  return kSuccess;
}

EXPORT int cuMemAlloc_v2(uintptr_t* p, size_t bytes) {
  const size_t len = (bytes + 4095) / 4096 * 4096;
  const int fd = memfd_create("fake-cuda-alloc", MFD_CLOEXEC);
  if (fd < 0) return 2;  // CUDA_ERROR_OUT_OF_MEMORY
  void* mem = ftruncate(fd, static_cast<off_t>(len)) == 0
                  ? mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
  if (mem == MAP_FAILED) {
    close(fd);
    return 2;
  }
  *p = reinterpret_cast<uintptr_t>(mem);
  std::lock_guard<std::mutex> lock(g_mu);
  g_device.push_back({*p, bytes, t_device < 0 ? 0 : t_device, fd, false});
  return kSuccess;
}
// Unmaps an allocation (free) or a mapping of a peer's (close).
static int unmap(uintptr_t p, bool imported) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (size_t i = 0; i < g_device.size(); ++i) {
    const Range r = g_device[i];
    if (r.base != p || r.imported != imported || (!imported && r.fd < 0)) continue;
    g_device.erase(g_device.begin() + static_cast<long>(i));
    munmap(reinterpret_cast<void*>(p), (r.bytes + 4095) / 4096 * 4096);
    if (r.fd >= 0) close(r.fd);
    return kSuccess;
  }
  return kInvalidValue;
}
EXPORT int cuMemFree_v2(uintptr_t p) { return unmap(p, false); }

EXPORT int cuIpcGetMemHandle(Handle* h, uintptr_t p) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const Range& r : g_device)
    if (r.base == p && r.fd >= 0 && !r.imported) {
      *h = Handle{kHandleMagic, static_cast<int32_t>(getpid()), r.fd, r.gpu, r.bytes, {}};
      return kSuccess;
    }
  return kInvalidValue;
}
EXPORT int cuIpcOpenMemHandle_v2(uintptr_t* p, Handle h, unsigned) {
  if (h.magic != kHandleMagic) return kInvalidValue;
  if (h.pid == getpid()) return kInvalidValue;  // as the driver: not in the exporting process
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return kInvalidValue;
  void* mem = mmap(nullptr, (h.bytes + 4095) / 4096 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) return 2;
  *p = reinterpret_cast<uintptr_t>(mem);
  std::lock_guard<std::mutex> lock(g_mu);
  g_device.push_back({*p, h.bytes, h.gpu, -1, true});
  return kSuccess;
}
EXPORT int cuIpcCloseMemHandle(uintptr_t p) { return unmap(p, true); }
// The allocation (or mapping) holding p.
EXPORT int cuMemGetAddressRange_v2(uintptr_t* base, size_t* bytes, uintptr_t p) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const Range& r : g_device)
    if (p >= r.base && p < r.base + r.bytes) {
      if (base != nullptr) *base = r.base;
      if (bytes != nullptr) *bytes = r.bytes;
      return kSuccess;
    }
  return kInvalidValue;
}

// Host memory is what this "GPU" reads anyway.
EXPORT int cuMemHostRegister_v2(void*, size_t, unsigned) { return kSuccess; }
EXPORT int cuMemHostUnregister(void*) { return kSuccess; }
EXPORT int cuDeviceGetPCIBusId(char* id, int len, int device) {
  std::snprintf(id, static_cast<size_t>(len), "0000:%02x:00.0", 0x10 + device);
  return kSuccess;
}
EXPORT int cuDeviceGetByPCIBusId(int* device, const char* id) {
  unsigned bus = 0;
  if (std::sscanf(id, "0000:%x:00.0", &bus) != 1 || bus < 0x10) return kInvalidValue;
  *device = static_cast<int>(bus - 0x10);
  return kSuccess;
}
EXPORT int cuDeviceCanAccessPeer(int* can, int, int) {
  *can = 1;
  return kSuccess;
}

EXPORT int cuMemHostAlloc(void** p, size_t bytes, unsigned) {
  if (failing("cuMemHostAlloc")) return 2;
  *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return *p == nullptr ? 2 : kSuccess;
}
EXPORT int cuMemFreeHost(void* p) {
  std::free(p);
  return kSuccess;
}
EXPORT int cuMemHostGetDevicePointer_v2(uintptr_t* d, void* p, unsigned) {
  *d = reinterpret_cast<uintptr_t>(p);
  return kSuccess;
}

EXPORT int cuStreamCreate(void** s, unsigned) {
  // Kept reachable for the life of the process (their threads never end).
  static std::mutex mu;
  static auto* streams = new std::vector<Stream*>;  // never destroyed: stays reachable
  std::lock_guard<std::mutex> lock(mu);
  streams->push_back(new Stream);
  *s = streams->back();
  return kSuccess;
}
// CUDA_ERROR_NOT_READY (600) while work is queued or running.
EXPORT int cuStreamQuery(void* s) { return stream_of(s)->idle() ? kSuccess : 600; }
// As the driver: a copy's device side lies within one allocation.
static bool within_one_allocation(uintptr_t p, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mu);
  bool device = false;
  for (const Range& r : g_device) {
    if (p >= r.base && p + bytes <= r.base + r.bytes) return true;
    if (p < r.base + r.bytes && r.base < p + bytes) device = true;
  }
  return !device;  // host memory: not the driver's concern here
}

EXPORT int cuMemcpyAsync(uintptr_t dst, uintptr_t src, size_t bytes, void* s) {
  if (failing("cuMemcpyAsync")) return kInvalidValue;
  if (!within_one_allocation(dst, bytes) || !within_one_allocation(src, bytes)) return kInvalidValue;
  stream_of(s)->enqueue([=] { std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), bytes); });
  return kSuccess;
}
EXPORT int cuStreamWriteValue32_v2(void* s, uintptr_t addr, uint32_t value, unsigned) {
  if (failing("cuStreamWriteValue32")) return kInvalidValue;
  stream_of(s)->enqueue([=] {
    std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(addr)).store(value, std::memory_order_release);
  });
  return kSuccess;
}
// CU_STREAM_WAIT_VALUE_GEQ (0), cyclic as the driver's.
EXPORT int cuStreamWaitValue32_v2(void* s, uintptr_t addr, uint32_t value, unsigned flags) {
  if (flags != 0) return kInvalidValue;
  stream_of(s)->enqueue([=] {
    std::atomic_ref<uint32_t> flag(*reinterpret_cast<uint32_t*>(addr));
    while (static_cast<int32_t>(flag.load(std::memory_order_acquire) - value) < 0)
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  });
  return kSuccess;
}
EXPORT int cuLaunchHostFunc(void* s, void (*fn)(void*), void* data) {
  if (failing("cuLaunchHostFunc")) return kInvalidValue;
  stream_of(s)->enqueue([=] { fn(data); });
  return kSuccess;
}
EXPORT int cuGetErrorString(int rc, const char** text) {
  *text = rc == kInvalidValue ? "invalid argument (fake driver)" : "error (fake driver)";
  return kSuccess;
}
