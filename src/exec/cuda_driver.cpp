#include "exec/cuda_driver.h"

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <mutex>

namespace weft::exec::cuda {
namespace {

std::atomic<const Api*> g_api{nullptr};
std::atomic<int64_t> g_next_look_ns{0};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <class F>
void find(void* lib, F* f, const char* name, const char* older = nullptr) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  if (*f == nullptr && older != nullptr) *f = reinterpret_cast<F>(dlsym(lib, older));
}

}  // namespace

bool loaded() { return g_api.load(std::memory_order_relaxed) != nullptr; }

const Api* api() {
  const Api* a = g_api.load(std::memory_order_acquire);
  if (a != nullptr) return a;
  int64_t now = now_ns();
  if (now < g_next_look_ns.load(std::memory_order_relaxed)) return nullptr;
  g_next_look_ns.store(now + 1'000'000'000, std::memory_order_relaxed);
  // RTLD_NOLOAD: a handle only if the application already loaded the driver.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return nullptr;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if ((a = g_api.load(std::memory_order_acquire)) != nullptr) return a;
  static Api table;
  find(lib, &table.pointer_attributes, "cuPointerGetAttributes");
  find(lib, &table.host_alloc, "cuMemHostAlloc");
  find(lib, &table.host_free, "cuMemFreeHost");
  find(lib, &table.host_device_pointer, "cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer");
  find(lib, &table.copy_async, "cuMemcpyAsync");
  find(lib, &table.write_value32, "cuStreamWriteValue32_v2", "cuStreamWriteValue32");
  find(lib, &table.wait_value32, "cuStreamWaitValue32_v2", "cuStreamWaitValue32");
  find(lib, &table.ctx_get_device, "cuCtxGetDevice");
  find(lib, &table.error_string, "cuGetErrorString");
  find(lib, &table.mem_alloc, "cuMemAlloc_v2");
  find(lib, &table.mem_free, "cuMemFree_v2");
  find(lib, &table.ipc_get_handle, "cuIpcGetMemHandle");
  find(lib, &table.ipc_open_handle, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle");
  find(lib, &table.ipc_close_handle, "cuIpcCloseMemHandle");
  find(lib, &table.address_range, "cuMemGetAddressRange_v2", "cuMemGetAddressRange");
  find(lib, &table.host_register, "cuMemHostRegister_v2", "cuMemHostRegister");
  find(lib, &table.host_unregister, "cuMemHostUnregister");
  find(lib, &table.pci_bus_id, "cuDeviceGetPCIBusId");
  find(lib, &table.device_by_pci_bus_id, "cuDeviceGetByPCIBusId");
  find(lib, &table.can_access_peer, "cuDeviceCanAccessPeer");
  find(lib, &table.launch_host_func, "cuLaunchHostFunc");
  find(lib, &table.stream_is_capturing, "cuStreamIsCapturing");
  table.host_memory = dlsym(lib, "fake_cuda_mark") != nullptr;
  if (table.pointer_attributes == nullptr) return nullptr;  // not a CUDA driver
  g_api.store(&table, std::memory_order_release);  // the handle stays: the driver is never unloaded under us
  return &table;
}

std::string error_text(int rc) {
  const char* text = nullptr;
  const Api* a = api();
  if (a != nullptr && a->error_string != nullptr) a->error_string(rc, &text);
  return "CUDA error " + std::to_string(rc) + (text != nullptr ? std::string(" (") + text + ")" : std::string());
}

int current_device() {
  const Api* a = api();
  int device = -1;
  if (a == nullptr || a->ctx_get_device == nullptr || a->ctx_get_device(&device) != 0) return -1;
  return device;
}

int stream_capturing(const Api& d, Stream s, bool* on) {
  *on = false;
  if (d.stream_is_capturing == nullptr) return 0;
  int status = 0;
  const int rc = d.stream_is_capturing(s, &status);
  *on = rc == 0 && status != 0;
  return rc;
}

}  // namespace weft::exec::cuda
