// Flag pages: host memory the ranks of one host share (a memfd each rank opens
// through /proc/PID/fd/FD of its owner) and register for their GPUs, so that
// their streams write and wait on it (cuStreamWriteValue32/WaitValue32).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "exec/cuda_driver.h"

namespace weft::transport::cuda_p2p {

// A new zeroed page of `bytes` (a multiple of 4096): its memfd in *fd.
Status create_flag_page(size_t bytes, int* fd);
// Maps a page's memfd and registers it for the GPU.
Status map_flag_page(const exec::cuda::Api& d, int fd, size_t bytes, uint32_t** host, exec::cuda::DevicePtr* dev);
// Maps the page of process `pid`, whose memfd there is `fd`.
Status map_peer_flag_page(const exec::cuda::Api& d, int pid, int fd, size_t bytes, uint32_t** host,
                          exec::cuda::DevicePtr* dev);
void unmap_flag_page(const exec::cuda::Api& d, uint32_t* host, size_t bytes);

// A word of a page as the streams leave it, and one the host writes for them.
inline uint32_t load_flag(const uint32_t* w) {
  return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(w)).load(std::memory_order_acquire);
}
inline void store_flag(uint32_t* w, uint32_t v) { std::atomic_ref<uint32_t>(*w).store(v, std::memory_order_release); }

}  // namespace weft::transport::cuda_p2p
