// Collectives on device memory, ordered on the caller's CUDA stream as NCCL
// orders them: the call returns once its work is enqueued, later work on the
// stream sees the result, and the calling thread never waits for the GPU.
//
// The call is staged through pinned host memory (the cuda_staging path): on the
// stream, the input is copied into a slot of this communicator and the stream
// raises the slot's "staged" flag; the progress engine, which holds the call
// until that flag is up, runs it on the host copy with the host transports and
// raises "done" (also when the call fails: the error is the communicator's);
// the stream waits for "done" (a driver stream wait on pinned memory, no kernel
// and no host thread held), copies the result back and raises "free". The flags
// live in the slot's own pinned memory and count calls, so a slot is reused
// once the stream has copied out of it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "exec/cuda_driver.h"

namespace weft {

class DeviceStaging {
 public:
  enum Flag { kStaged = 0, kDone = 1, kFree = 2 };
  struct Slot {
    unsigned char* block = nullptr;  // pinned: the flags, then the data at kDataOffset
    exec::cuda::DevicePtr block_dev = 0;  // the same memory as the device sees it
    size_t capacity = 0;
    uint32_t gen = 0;  // calls staged here so far; the flags hold the last one's number
    bool abandoned = false;  // a stream step failed: the stream may never free it
    unsigned char* data() const { return block + kDataOffset; }
    exec::cuda::DevicePtr flag_dev(Flag f) const { return block_dev + static_cast<unsigned>(f) * sizeof(uint32_t); }
    // Flags written by the stream (staged, free) are read as it leaves them.
    uint32_t flag(Flag f) const {
      return std::atomic_ref<uint32_t>(reinterpret_cast<uint32_t*>(block)[f]).load(std::memory_order_acquire);
    }
    void raise(Flag f, uint32_t value) {
      std::atomic_ref<uint32_t>(reinterpret_cast<uint32_t*>(block)[f]).store(value, std::memory_order_release);
    }
    // Whether flag f has reached call number `value` (cyclic, as the driver's wait).
    bool reached(Flag f, uint32_t value) const { return static_cast<int32_t>(flag(f) - value) >= 0; }
  };
  static constexpr size_t kDataOffset = 256;

  DeviceStaging() = default;
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;
  // Waits (until the deadline) for the streams to copy out of every slot, then
  // frees them; a slot a stream may still read is left allocated, with a warning.
  ~DeviceStaging();
  void set_timeout_ms(int64_t ms) { timeout_ms_ = ms; }

  // A slot of at least `bytes` that no stream still uses, with its gen advanced
  // for the caller's call (`what`, logged where memory is pinned for it). Any thread.
  Status take(const exec::cuda::Api& d, size_t bytes, const char* what, Slot** out);
  // The next call number of a slot its caller holds and uses again, in stream
  // order after its last call (chunks of one call).
  uint32_t reuse(Slot* slot) {
    std::lock_guard<std::mutex> lock(mu_);
    return ++slot->gen;
  }
  // A slot taken for a call that failed before any stream work used it: free
  // at once (nothing on a stream will write its flags), so that neither later
  // calls nor the destructor wait for it.
  void untake(Slot* slot) { slot->raise(kFree, slot->gen); }

 private:
  Status allocate(const exec::cuda::Api& d, size_t bytes, const char* what, std::unique_ptr<Slot>* out);
  std::mutex mu_;
  std::vector<std::unique_ptr<Slot>> slots_;
  const exec::cuda::Api* driver_ = nullptr;  // the one the slots came from
  int64_t timeout_ms_ = 300000;
};

}  // namespace weft
