#include "exec/buffer_kind.h"

#include "exec/cuda_driver.h"

namespace weft::exec {

BufferKind buffer_kind(const void* p) {
  BufferKind k;
  const cuda::Api* d = cuda::api();
  if (d == nullptr || p == nullptr) return k;
  const int attributes[2] = {cuda::kAttrMemoryType, cuda::kAttrDeviceOrdinal};
  unsigned type = 0;
  int gpu = -1;
  void* data[2] = {&type, &gpu};
  // Ordinary host memory is unknown to the driver: memory type 0, so host.
  if (d->pointer_attributes(2, attributes, data, reinterpret_cast<cuda::DevicePtr>(p)) != 0 ||
      type != cuda::kMemoryTypeDevice)
    return k;
  k.device = true;
  k.gpu = gpu;
  return k;
}

}  // namespace weft::exec
