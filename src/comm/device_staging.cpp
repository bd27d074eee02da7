#include "comm/device_staging.h"

#include <cstring>

#include "base/log.h"
#include "base/wait.h"

namespace weft {
namespace {

bool idle(const DeviceStaging::Slot& s) { return !s.abandoned && s.reached(DeviceStaging::kFree, s.gen); }

}  // namespace

Status DeviceStaging::allocate(const exec::cuda::Api& d, size_t bytes, std::unique_ptr<Slot>* out) {
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
  *out = std::move(s);
  return Status::Ok();
}

Status DeviceStaging::take(const exec::cuda::Api& d, size_t bytes, Slot** out) {
  std::lock_guard<std::mutex> lock(mu_);
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
  std::unique_ptr<Slot> fresh;
  WEFT_TRY(allocate(d, bytes, &fresh));
  fresh->gen = 1;
  *out = fresh.get();
  if (smaller != nullptr) {  // replaced by the larger one: idle slots only ever grow
    d.host_free(smaller->block);
    for (auto& s : slots_)
      if (s.get() == smaller) s = std::move(fresh);
  } else {
    slots_.push_back(std::move(fresh));
  }
  return Status::Ok();
}

DeviceStaging::~DeviceStaging() {
  if (slots_.empty()) return;
  const exec::cuda::Api* d = exec::cuda::api();
  Deadline deadline = Deadline::after_ms(timeout_ms_);
  SpinWait wait;
  for (auto& s : slots_) {
    while (!s->abandoned && !idle(*s) && !deadline.expired()) wait.pause();
    if (!idle(*s)) {
      WEFT_WARN(INIT, "destroying a communicator whose stream has not copied call %u out of its staging slot "
                "after %lld ms: the slot's %zu bytes of pinned memory stay allocated", s->gen,
                static_cast<long long>(timeout_ms_), s->capacity);
      continue;
    }
    if (d != nullptr) d->host_free(s->block);
  }
}

}  // namespace weft
