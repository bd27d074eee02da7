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
using Stream = void*;                  // CUstream (== cudaStream_t); nullptr: the legacy default stream

// cuda.h's values.
constexpr int kAttrMemoryType = 2;     // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttrDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kMemoryTypeDevice = 2;
constexpr unsigned kHostAllocPortable = 0x01;  // CU_MEMHOSTALLOC_PORTABLE
constexpr unsigned kHostAllocDeviceMap = 0x02;  // CU_MEMHOSTALLOC_DEVICEMAP
constexpr unsigned kWaitValueGeq = 0x0;         // CU_STREAM_WAIT_VALUE_GEQ (cyclic: (int32_t)(*addr - v) >= 0)

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

}  // namespace weft::exec::cuda
