#include "transports/cuda_p2p/flag_page.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace weft::transport::cuda_p2p {

Status create_flag_page(size_t bytes, int* fd) {
  *fd = memfd_create("weft-p2p-flags", MFD_CLOEXEC);
  if (*fd < 0) return SysError(errno, "memfd for a cuda_p2p flag page");
  if (ftruncate(*fd, static_cast<off_t>(bytes)) != 0) {
    const int e = errno;
    close(*fd);
    *fd = -1;
    return SysError(e, "sizing a cuda_p2p flag page");
  }
  return Status::Ok();
}

Status map_flag_page(const exec::cuda::Api& d, int fd, size_t bytes, uint32_t** host, exec::cuda::DevicePtr* dev) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return SysError(errno, "mapping a cuda_p2p flag page");
  int rc = d.host_register(p, bytes, exec::cuda::kHostRegisterPortable | exec::cuda::kHostRegisterDeviceMap);
  if (rc == 0) {
    rc = d.host_device_pointer(dev, p, 0);
    if (rc != 0) d.host_unregister(p);
  }
  if (rc != 0) {
    munmap(p, bytes);
    return Error(weftUnhandledCudaError, "registering a cuda_p2p flag page for the GPU: %s",
                 exec::cuda::error_text(rc).c_str());
  }
  *host = static_cast<uint32_t*>(p);
  return Status::Ok();
}

Status map_peer_flag_page(const exec::cuda::Api& d, int pid, int fd, size_t bytes, uint32_t** host,
                          exec::cuda::DevicePtr* dev) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int mine = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (mine < 0) return SysError(errno, "flag page %s", path.c_str());
  Status st = map_flag_page(d, mine, bytes, host, dev);
  close(mine);
  return st;
}

void unmap_flag_page(const exec::cuda::Api& d, uint32_t* host, size_t bytes) {
  if (host == nullptr) return;
  d.host_unregister(host);
  munmap(host, bytes);
}

}  // namespace weft::transport::cuda_p2p
