#include "exec/buffer_kind.h"

#include "exec/cuda_driver.h"

namespace weft::exec {

BufferKind buffer_kind(const void* p) {
  BufferKind k;
  const cuda::Api* d = cuda::api();
  if (d == nullptr || p == nullptr) return k;
  const auto ptr = reinterpret_cast<cuda::DevicePtr>(p);
  unsigned type = 0;
  // Ordinary host memory is unknown to the driver: an error, so host.
  if (d->pointer_attribute(&type, cuda::kAttrMemoryType, ptr) != 0 || type != cuda::kMemoryTypeDevice) return k;
  k.device = true;
  if (d->pointer_attribute(&k.gpu, cuda::kAttrDeviceOrdinal, ptr) != 0) k.gpu = -1;
  return k;
}

}  // namespace weft::exec
