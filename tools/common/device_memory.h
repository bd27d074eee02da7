// Device memory for weft-perf --device and the multi-process checks, through the
// CUDA driver API of a driver library the program loads itself: the real one
// (libcuda.so.1) on a GPU machine, or the stand-in
// (tests/unit/exec/fake_cuda_driver.cpp) anywhere. No CUDA headers or libraries
// are needed to build them. Load it before the first weft call: weft looks for a
// loaded driver at most once a second.
#pragma once

#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

namespace weft_tools {

class DeviceMemory {
 public:
  // Loads `driver` (a path, or "libcuda.so.1"), makes device `rank % devices`
  // current and creates a stream. false (printed) on failure.
  bool open(const std::string& driver, int rank) {
    lib_ = dlopen(driver.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (lib_ == nullptr) return fail(std::string("loading ") + driver + ": " + dlerror());
    bool found = sym(&init_, "cuInit") && sym(&device_count_, "cuDeviceGetCount") && sym(&device_get_, "cuDeviceGet") &&
                 sym(&retain_, "cuDevicePrimaryCtxRetain") && sym(&set_current_, "cuCtxSetCurrent") &&
                 sym(&alloc_, "cuMemAlloc_v2") && sym(&free_, "cuMemFree_v2") && sym(&stream_create_, "cuStreamCreate") &&
                 sym(&query_, "cuStreamQuery") && sym(&copy_, "cuMemcpyAsync");
    if (!found) return false;
    name_ = reinterpret_cast<int (*)(char*, int, int)>(dlsym(lib_, "cuDeviceGetName"));
    host_alloc_ = reinterpret_cast<int (*)(void**, size_t, unsigned)>(dlsym(lib_, "cuMemHostAlloc"));
    host_free_ = reinterpret_cast<int (*)(void*)>(dlsym(lib_, "cuMemFreeHost"));
    hold_ = reinterpret_cast<void (*)(void*, int)>(dlsym(lib_, "fake_cuda_stream_hold"));
    begin_capture_ = reinterpret_cast<int (*)(void*, int)>(dlsym(lib_, "cuStreamBeginCapture_v2"));
    end_capture_ = reinterpret_cast<int (*)(void*, void**)>(dlsym(lib_, "cuStreamEndCapture"));
    instantiate_ = reinterpret_cast<int (*)(void**, void*, unsigned long long)>(dlsym(lib_, "cuGraphInstantiateWithFlags"));
    launch_ = reinterpret_cast<int (*)(void*, void*)>(dlsym(lib_, "cuGraphLaunch"));
    exec_destroy_ = reinterpret_cast<int (*)(void*)>(dlsym(lib_, "cuGraphExecDestroy"));
    graph_destroy_ = reinterpret_cast<int (*)(void*)>(dlsym(lib_, "cuGraphDestroy"));
    touching_pair_ = reinterpret_cast<void* (*)(size_t)>(dlsym(lib_, "fake_cuda_alloc_touching_pair"));
    fail_next_ = reinterpret_cast<void (*)(const char*)>(dlsym(lib_, "fake_cuda_fail_next"));
    int devices = 0, dev = 0;
    void* ctx = nullptr;
    if (!cu(init_(0), "cuInit") || !cu(device_count_(&devices), "cuDeviceGetCount")) return false;
    if (devices < 1) return fail("no CUDA device");
    device_ = rank % devices;
    return cu(device_get_(&dev, device_), "cuDeviceGet") && cu(retain_(&ctx, dev), "cuDevicePrimaryCtxRetain") &&
           cu(set_current_(ctx), "cuCtxSetCurrent") && cu(stream_create_(&stream_, 1), "cuStreamCreate");
  }
  void* stream() const { return stream_; }
  int device() const { return device_; }
  bool is_fake() const { return hold_ != nullptr; }
  std::string name() const {
    char text[128] = "unknown";
    if (name_ != nullptr) name_(text, sizeof(text), device_);
    return text;
  }
  void* alloc(size_t bytes) {
    uintptr_t p = 0;
    return cu(alloc_(&p, bytes < 1 ? 1 : bytes), "cuMemAlloc") ? reinterpret_cast<void*>(p) : nullptr;
  }
  void release(void* p) { free_(reinterpret_cast<uintptr_t>(p)); }
  // `bytes` starting at a multiple of `align` (a power of two; a symmetric
  // window's WEFT_WIN_REQUIRED_ALIGNMENT), inside an allocation *raw that
  // release() takes; nullptr on failure.
  void* alloc_aligned(size_t bytes, size_t align, void** raw) {
    *raw = alloc(bytes + align);
    if (*raw == nullptr) return nullptr;
    return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(*raw) + align - 1) & ~(uintptr_t{align} - 1));
  }
  // Page-locked host memory (for copy bandwidth bounds); nullptr on failure.
  void* alloc_pinned(size_t bytes) {
    void* p = nullptr;
    return host_alloc_ != nullptr && cu(host_alloc_(&p, bytes, 0), "cuMemHostAlloc") ? p : nullptr;
  }
  void release_pinned(void* p) { host_free_(p); }
  // Stream-ordered copy (either direction).
  bool copy(void* dst, const void* src, size_t bytes) {
    return bytes == 0 ||
           cu(copy_(reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), bytes, stream_), "cuMemcpyAsync");
  }
  // Until the stream has run everything enqueued on it; false (printed) if it
  // has not after kSyncTimeoutS, so that a stream left waiting for a flag that
  // never comes fails the check instead of holding the process forever.
  bool synchronize() { return synchronize(stream_); }
  bool synchronize(void* stream) {
    constexpr int kNotReady = 600;  // CUDA_ERROR_NOT_READY
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kSyncTimeoutS);
    for (int polls = 0;; ++polls) {
      const int rc = query_(stream);
      if (rc != kNotReady) return cu(rc, "cuStreamQuery");
      if (std::chrono::steady_clock::now() > deadline)
        return fail("stream " + std::to_string(reinterpret_cast<uintptr_t>(stream)) + " has not finished its work " +
                    std::to_string(kSyncTimeoutS) + " s after the synchronize began (a stream wait never met?)");
      // Spin briefly (a timed batch's end), then sleep: ranks may share the cores.
      if (polls < 2000) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  // CUDA graphs: the stream's work between begin_capture and end_capture
  // (global capture mode, PyTorch's default) instantiated; nullptr on failure.
  bool can_capture() const {
    return begin_capture_ && end_capture_ && instantiate_ && launch_ && exec_destroy_ && graph_destroy_;
  }
  bool begin_capture() { return cu(begin_capture_(stream_, 0), "cuStreamBeginCapture"); }
  void* end_capture() {
    void *graph = nullptr, *exec = nullptr;
    if (!cu(end_capture_(stream_, &graph), "cuStreamEndCapture")) return nullptr;
    const bool ok = cu(instantiate_(&exec, graph, 0), "cuGraphInstantiateWithFlags");
    graph_destroy_(graph);
    return ok ? exec : nullptr;
  }
  bool launch(void* exec) { return cu(launch_(exec, stream_), "cuGraphLaunch"); }
  void destroy_graph(void* exec) { exec_destroy_(exec); }
  // The stand-in driver's controls (is_fake() only).
  void hold(bool on) { hold_(stream_, on ? 1 : 0); }
  void fail_next(const char* fn) { fail_next_(fn); }
  // Two allocations of `bytes` side by side, never freed.
  void* alloc_touching_pair(size_t bytes) { return touching_pair_(bytes); }

 private:
  template <class F>
  bool sym(F* f, const char* name) {
    *f = reinterpret_cast<F>(dlsym(lib_, name));
    return *f != nullptr || fail(std::string("the driver lacks ") + name);
  }
  bool cu(int rc, const char* what) {
    return rc == 0 || fail(std::string(what) + " returned CUDA error " + std::to_string(rc));
  }
  bool fail(const std::string& why) {
    std::fprintf(stderr, "device memory: %s\n", why.c_str());
    return false;
  }
  static constexpr int kSyncTimeoutS = 150;
  void* lib_ = nullptr;
  void* stream_ = nullptr;
  int device_ = 0;
  int (*init_)(unsigned) = nullptr;
  int (*device_count_)(int*) = nullptr;
  int (*device_get_)(int*, int) = nullptr;
  int (*retain_)(void**, int) = nullptr;
  int (*set_current_)(void*) = nullptr;
  int (*alloc_)(uintptr_t*, size_t) = nullptr;
  int (*free_)(uintptr_t) = nullptr;
  int (*stream_create_)(void**, unsigned) = nullptr;
  int (*query_)(void*) = nullptr;
  int (*copy_)(uintptr_t, uintptr_t, size_t, void*) = nullptr;
  int (*name_)(char*, int, int) = nullptr;
  int (*host_alloc_)(void**, size_t, unsigned) = nullptr;
  int (*host_free_)(void*) = nullptr;
  void (*hold_)(void*, int) = nullptr;
  int (*begin_capture_)(void*, int) = nullptr;
  int (*end_capture_)(void*, void**) = nullptr;
  int (*instantiate_)(void**, void*, unsigned long long) = nullptr;
  int (*launch_)(void*, void*) = nullptr;
  int (*exec_destroy_)(void*) = nullptr;
  int (*graph_destroy_)(void*) = nullptr;
  void* (*touching_pair_)(size_t) = nullptr;
  void (*fail_next_)(const char*) = nullptr;
};

}  // namespace weft_tools
