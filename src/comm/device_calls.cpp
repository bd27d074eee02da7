// Communicator::enqueue: a collective on device memory, staged through pinned
// host memory and ordered on the caller's stream (device_staging.h).
#include <algorithm>
#include <memory>

#include "comm/communicator.h"
#include "comm/operations.h"
#include "exec/cuda_driver.h"

namespace weft {
namespace {

exec::cuda::DevicePtr dptr(const void* p) { return reinterpret_cast<exec::cuda::DevicePtr>(p); }

const char* missing_entry(const exec::cuda::Api& d) {
  if (d.host_alloc == nullptr) return "cuMemHostAlloc";
  if (d.host_free == nullptr) return "cuMemFreeHost";
  if (d.host_device_pointer == nullptr) return "cuMemHostGetDevicePointer";
  if (d.copy_async == nullptr) return "cuMemcpyAsync";
  if (d.write_value32 == nullptr) return "cuStreamWriteValue32";
  if (d.wait_value32 == nullptr) return "cuStreamWaitValue32";
  return nullptr;
}

}  // namespace

Status Communicator::enqueue(const CollArgs& dev, void* stream) {
  const char* name = sched::coll_name(dev.coll);
  WEFT_TRY(validate(dev, true));
  WEFT_TRY(async_error());
  const exec::cuda::Api* d = exec::cuda::api();
  if (d == nullptr)
    return Error(weftUnhandledCudaError, "%s on stream %p: no CUDA driver is loaded in this process", name, stream);
  if (const char* lacks = missing_entry(*d))
    return Error(weftUnhandledCudaError,
                 "%s on stream %p: the loaded CUDA driver lacks %s (stream memory operations need CUDA 12 or later)",
                 name, stream, lacks);

  // The bytes the call reads and writes on this rank, staged in one slot. Buffers
  // in the in-place position keep it on the host: one range holds both.
  const size_t esize = reduce::dtype_size(dev.dtype);
  const sched::BuildArgs b{dev.coll, nranks_, dev.count, dev.root, 0};
  const bool uses_send = dev.count > 0 && !(dev.coll == sched::Coll::Broadcast && rank_ != dev.root);
  const bool uses_recv = dev.count > 0 && !(dev.coll == sched::Coll::Reduce && rank_ != dev.root);
  const size_t sb = uses_send ? sched::send_count(b) * esize : 0;
  const size_t rb = uses_recv ? sched::recv_count(b) * esize : 0;
  const auto s = reinterpret_cast<uintptr_t>(dev.send), r = reinterpret_cast<uintptr_t>(dev.recv);
  size_t send_at = 0, recv_at = 0, bytes = 0;
  if (sb > 0 && rb > 0 && s < r + rb && r < s + sb) {
    const uintptr_t lo = std::min(s, r);
    send_at = s - lo;
    recv_at = r - lo;
    bytes = std::max(s + sb, r + rb) - lo;
  } else {
    recv_at = (sb + 255) / 256 * 256;
    bytes = recv_at + rb;
  }
  DeviceStaging::Slot* slot = nullptr;
  WEFT_TRY(staging_.take(*d, bytes, &slot));
  const uint32_t gen = slot->gen;
  CollArgs host = dev;
  host.send = uses_send ? slot->data() + send_at : nullptr;
  host.recv = uses_recv ? slot->data() + recv_at : nullptr;

  // A step the stream refuses leaves it out of step with the call: the
  // communicator fails (its peers learn of it through the bootstrap).
  auto cuda_step = [&](int rc, const char* what) {
    if (rc == 0) return Status::Ok();
    Status st = Error(weftUnhandledCudaError, "%s on stream %p: %s: %s", name, stream, what,
                      exec::cuda::error_text(rc).c_str());
    slot->abandoned = true;
    fail(st);
    return st;
  };
  if (sb > 0)
    WEFT_TRY(cuda_step(d->copy_async(dptr(host.send), dptr(dev.send), sb, stream), "copying the input to pinned memory"));
  WEFT_TRY(cuda_step(d->write_value32(stream, slot->flag_dev(DeviceStaging::kStaged), gen, 0), "signalling the staged input"));
  auto op = std::make_unique<CollOp>(this, host, nullptr);
  op->stage(slot, gen, timeout_ms_);
  queue_->post(std::move(op));
  WEFT_TRY(cuda_step(d->wait_value32(stream, slot->flag_dev(DeviceStaging::kDone), gen, exec::cuda::kWaitValueGeq),
                     "waiting for the staged result"));
  if (rb > 0)
    WEFT_TRY(cuda_step(d->copy_async(dptr(dev.recv), dptr(host.recv), rb, stream), "copying the result back"));
  return cuda_step(d->write_value32(stream, slot->flag_dev(DeviceStaging::kFree), gen, 0), "releasing the staging slot");
}

}  // namespace weft
