// A stand-in for the CUDA driver (built as libcuda.so.1) for machines without a
// GPU: it answers cuPointerGetAttribute as the driver does, with memory that
// fake_cuda_mark() named as device memory of a GPU, and "not mine" otherwise.
// A test loads it, so weft finds "the driver" loaded as in a CUDA application.
#include <cstddef>
#include <cstdint>

namespace {
uintptr_t g_base = 0;
size_t g_bytes = 0;
int g_gpu = -1;
}  // namespace

extern "C" {

__attribute__((visibility("default"))) void fake_cuda_mark(const void* base, size_t bytes, int gpu) {
  g_base = reinterpret_cast<uintptr_t>(base);
  g_bytes = bytes;
  g_gpu = gpu;
}

// CUDA_SUCCESS 0, CUDA_ERROR_INVALID_VALUE 1; attribute 2: memory type
// (CU_MEMORYTYPE_DEVICE 2), 9: device ordinal.
__attribute__((visibility("default"))) int cuPointerGetAttribute(void* data, int attribute, uintptr_t ptr) {
  if (ptr < g_base || ptr >= g_base + g_bytes) return 1;
  if (attribute == 2) *static_cast<unsigned*>(data) = 2;
  else if (attribute == 9) *static_cast<int*>(data) = g_gpu;
  else return 1;
  return 0;
}
}
