#include "comm/device_staging.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/log.h"
#include "base/params.h"
#include "base/wait.h"

namespace weft {
namespace {

bool idle(const DeviceStaging::Slot& s) { return !s.abandoned && s.reached(DeviceStaging::kFree, s.gen); }

}  // namespace

Status DeviceStaging::allocate(const exec::cuda::Api& d, size_t bytes, const char* what, std::unique_ptr<Slot>* out) {
  auto s = std::make_unique<Slot>();
  // Rounded up so that a slot serves the sizes near it too.
  s->capacity = bytes < 4096 ? 4096 : (bytes + 65535) / 65536 * 65536;
  void* p = nullptr;
  int rc = d.host_alloc(&p, kDataOffset + s->capacity, exec::cuda::kHostAllocPortable | exec::cuda::kHostAllocDeviceMap);
  if (rc != 0)
    return Error(weftUnhandledCudaError, "pinning %zu bytes of host memory to stage a device call: %s",
                 kDataOffset + s->capacity, exec::cuda::error_text(rc).c_str());
  s->block = static_cast<unsigned char*>(p);
  std::memset(s->block, 0, kDataOffset);
  rc = d.host_device_pointer(&s->block_dev, p, 0);
  if (rc != 0) {
    d.host_free(p);
    return Error(weftUnhandledCudaError, "mapping pinned staging memory for the GPU: %s",
                 exec::cuda::error_text(rc).c_str());
  }
  WEFT_INFO(TRANSPORT, "device staging: pinned a %zu-byte slot for %s", s->capacity, what);
  *out = std::move(s);
  return Status::Ok();
}

Status DeviceStaging::take(const exec::cuda::Api& d, size_t bytes, const char* what, Slot** out) {
  const size_t cap = static_cast<size_t>(std::max<int64_t>(1, params::DEVICE_STAGING_SLOTS()));
  Deadline deadline = Deadline::after_ms(timeout_ms_);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      driver_ = &d;
      Slot* smaller = nullptr;
      for (auto& s : slots_) {
        if (!idle(*s)) continue;
        if (s->capacity >= bytes) {
          ++s->gen;
          *out = s.get();
          return Status::Ok();
        }
        smaller = s.get();
      }
      if (slots_.size() < cap || smaller != nullptr) {
        std::unique_ptr<Slot> fresh;
        WEFT_TRY(allocate(d, bytes, what, &fresh));
        fresh->gen = 1;
        *out = fresh.get();
        if (slots_.size() < cap) {
          slots_.push_back(std::move(fresh));
        } else {  // replaces the idle smaller one
          d.host_free(smaller->block);
          for (auto& s : slots_)
            if (s.get() == smaller) s = std::move(fresh);
        }
        return Status::Ok();
      }
    }
    // Every slot holds a call its stream has not finished: wait for the oldest.
    if (deadline.expired())
      return Error(weftTimeout,
                   "all %zu staging slots (WEFT_DEVICE_STAGING_SLOTS) still hold calls whose streams have not "
                   "finished them after WEFT_TIMEOUT_MS=%lld ms",
                   cap, static_cast<long long>(timeout_ms_));
    // The GPU frees slots at its own pace: no spinning on the caller's core.
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

DeviceStaging::~DeviceStaging() {
  if (slots_.empty()) return;
  Deadline deadline = Deadline::after_ms(timeout_ms_);
  SpinWait wait;
  for (auto& s : slots_) {
    // A slot whose stream step failed may still be read by the stream: it stays.
    if (s->abandoned) continue;
    while (!idle(*s) && !deadline.expired()) wait.pause();
    if (!idle(*s)) {
      WEFT_WARN(INIT, "destroying a communicator whose stream has not copied call %u out of its staging slot "
                "after %lld ms: the slot's %zu bytes of pinned memory stay allocated", s->gen,
                static_cast<long long>(timeout_ms_), s->capacity);
      continue;
    }
    driver_->host_free(s->block);
  }
}

}  // namespace weft
