// The CUDA driver entry points weft uses, taken from the driver the application
// has loaded (libcuda.so.1). weft never loads the driver itself and needs no
// CUDA headers or libraries to build: only a process that loaded CUDA can hold
// a device pointer or a stream, so only there are these asked for. Tests load a
// stand-in driver with the same entry points (tests/unit/exec/fake_cuda_driver.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::exec::cuda {

using DevicePtr = unsigned long long;  // CUdeviceptr
// A pointer as the driver's calls take it (device memory and registered host
// memory are addressed alike under unified addressing).
inline DevicePtr dptr(const void* p) { return reinterpret_cast<DevicePtr>(p); }
using Stream = void*;                  // CUstream (== cudaStream_t); nullptr: the legacy default stream

// cuda.h's values.
constexpr int kAttrMemoryType = 2;     // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttrDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kMemoryTypeDevice = 2;
constexpr unsigned kHostAllocPortable = 0x01;  // CU_MEMHOSTALLOC_PORTABLE
constexpr unsigned kHostAllocDeviceMap = 0x02;  // CU_MEMHOSTALLOC_DEVICEMAP
constexpr unsigned kWaitValueGeq = 0x0;         // CU_STREAM_WAIT_VALUE_GEQ (cyclic: (int32_t)(*addr - v) >= 0)
constexpr unsigned kHostRegisterPortable = 0x01;  // CU_MEMHOSTREGISTER_PORTABLE
constexpr unsigned kHostRegisterDeviceMap = 0x02;  // CU_MEMHOSTREGISTER_DEVICEMAP
constexpr unsigned kIpcLazyEnablePeerAccess = 0x1;  // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS

// CUipcMemHandle: passed by value, as the driver declares it.
struct IpcHandle {
  char reserved[64];
};

// Every pointer is nullptr where the driver lacks the function. Each returns a
// CUresult (0: CUDA_SUCCESS).
struct Api {
  // cuPointerGetAttributes: unlike cuPointerGetAttribute it answers for host
  // memory the driver does not know too (memory type 0), without an error.
  int (*pointer_attributes)(unsigned count, const int* attributes, void** data, DevicePtr ptr);
  int (*host_alloc)(void** p, size_t bytes, unsigned flags);          // cuMemHostAlloc
  int (*host_free)(void* p);                                           // cuMemFreeHost
  int (*host_device_pointer)(DevicePtr* d, void* p, unsigned flags);   // cuMemHostGetDevicePointer_v2
  int (*copy_async)(DevicePtr dst, DevicePtr src, size_t bytes, Stream s);  // cuMemcpyAsync (unified addressing)
  int (*write_value32)(Stream s, DevicePtr addr, uint32_t value, unsigned flags);  // cuStreamWriteValue32_v2
  int (*wait_value32)(Stream s, DevicePtr addr, uint32_t value, unsigned flags);   // cuStreamWaitValue32_v2
  int (*ctx_get_device)(int* device);                                  // cuCtxGetDevice
  int (*error_string)(int rc, const char** text);                      // cuGetErrorString
  // Device memory shared between the processes of one host (cuda_p2p).
  int (*mem_alloc)(DevicePtr* p, size_t bytes);                        // cuMemAlloc_v2
  int (*mem_free)(DevicePtr p);                                        // cuMemFree_v2
  int (*ipc_get_handle)(IpcHandle* h, DevicePtr p);                    // cuIpcGetMemHandle
  int (*ipc_open_handle)(DevicePtr* p, IpcHandle h, unsigned flags);   // cuIpcOpenMemHandle_v2
  int (*ipc_close_handle)(DevicePtr p);                                // cuIpcCloseMemHandle
  int (*address_range)(DevicePtr* base, size_t* bytes, DevicePtr p);   // cuMemGetAddressRange_v2
  int (*host_register)(void* p, size_t bytes, unsigned flags);         // cuMemHostRegister_v2
  int (*host_unregister)(void* p);                                     // cuMemHostUnregister
  int (*pci_bus_id)(char* id, int len, int device);                    // cuDeviceGetPCIBusId
  int (*device_by_pci_bus_id)(int* device, const char* id);            // cuDeviceGetByPCIBusId
  int (*can_access_peer)(int* can, int device, int peer);              // cuDeviceCanAccessPeer
  int (*launch_host_func)(Stream s, void (*fn)(void*), void* data);    // cuLaunchHostFunc
  int (*stream_is_capturing)(Stream s, int* status);                   // cuStreamIsCapturing (0: not capturing)
  // The stand-in driver of the tests (it exports fake_cuda_mark): its "device
  // memory" is host memory, so weft's device reductions run as host functions
  // on the stream there instead of CUDA kernels.
  bool host_memory;
};

// The legacy default stream (CU_STREAM_LEGACY, cudaStreamLegacy).
inline Stream const kLegacyStream = reinterpret_cast<Stream>(0x1);

// Whether a driver was found already (no new look): the cheap test on every call.
bool loaded();

// The loaded driver's entry points, or nullptr while the application has not
// loaded one (then looked for again at most once a second: an application may
// load CUDA after its first call).
const Api* api();

// "CUDA error 700 (an illegal memory access was encountered)" for a CUresult.
std::string error_text(int rc);

// The device of the calling thread's current context, or -1 (no driver, no context).
int current_device();

// *on: whether stream `s` is being captured into a CUDA graph. The CUresult of
// cuStreamIsCapturing (0, not capturing, where the driver lacks it).
int stream_capturing(const Api& d, Stream s, bool* on);

}  // namespace weft::exec::cuda
