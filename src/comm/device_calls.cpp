// Communicator::enqueue and enqueue_p2p: operations on device memory, staged
// through pinned host memory and ordered on the caller's stream
// (device_staging.h).
#include <algorithm>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/operations.h"
#include "comm/staging_layout.h"
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

// The loaded driver, if it can order a staged call on a stream.
Status stream_driver(const char* what, void* stream, const exec::cuda::Api** out) {
  const exec::cuda::Api* d = exec::cuda::api();
  if (d == nullptr)
    return Error(weftUnhandledCudaError, "%s on stream %p: no CUDA driver is loaded in this process", what, stream);
  if (const char* lacks = missing_entry(*d))
    return Error(weftUnhandledCudaError,
                 "%s on stream %p: the loaded CUDA driver lacks %s (stream memory operations need CUDA 12 or later)",
                 what, stream, lacks);
  *out = d;
  return Status::Ok();
}

}  // namespace

// Takes a slot for the layout, queues the copies in and the staged flag on the
// stream, posts the operation made by make_op(slot data) gated on that flag, and
// queues the wait for its done flag, the copies out and the free flag. A step the
// stream refuses leaves it out of step with the engine: the communicator fails
// (its peers learn of it through the bootstrap).
template <class MakeOp>
Status Communicator::stage_on_stream(const char* what, void* stream, StagingLayout& layout, MakeOp make_op) {
  const exec::cuda::Api* d = nullptr;
  WEFT_TRY(stream_driver(what, stream, &d));
  DeviceStaging::Slot* slot = nullptr;
  WEFT_TRY(staging_.take(*d, layout.place(), &slot));
  const uint32_t gen = slot->gen;
  auto step = [&](int rc, const char* doing) {
    if (rc == 0) return Status::Ok();
    Status st = Error(weftUnhandledCudaError, "%s on stream %p: %s: %s", what, stream, doing,
                      exec::cuda::error_text(rc).c_str());
    slot->abandoned = true;
    fail(st);
    return st;
  };
  unsigned char* base = slot->data();
  WEFT_TRY(layout.each(true, [&](void* dev, size_t bytes, size_t at) {
    return step(d->copy_async(dptr(base + at), dptr(dev), bytes, stream), "copying the input to pinned memory");
  }));
  WEFT_TRY(step(d->write_value32(stream, slot->flag_dev(DeviceStaging::kStaged), gen, 0), "signalling the staged input"));
  auto op = make_op(base);
  op->stage(slot, gen, timeout_ms_);
  queue_->post(std::move(op));
  WEFT_TRY(step(d->wait_value32(stream, slot->flag_dev(DeviceStaging::kDone), gen, exec::cuda::kWaitValueGeq),
                "waiting for the staged result"));
  WEFT_TRY(layout.each(false, [&](void* dev, size_t bytes, size_t at) {
    return step(d->copy_async(dptr(dev), dptr(base + at), bytes, stream), "copying the result back");
  }));
  return step(d->write_value32(stream, slot->flag_dev(DeviceStaging::kFree), gen, 0), "releasing the staging slot");
}

Status Communicator::enqueue(const CollArgs& dev, void* stream) {
  WEFT_TRY(validate(dev, true));
  WEFT_TRY(async_error());
  // The bytes the call reads and writes on this rank. Buffers in the in-place
  // position merge into one segment, so the host call is in place too.
  const size_t esize = reduce::dtype_size(dev.dtype);
  const sched::BuildArgs b{dev.coll, nranks_, dev.count, dev.root, 0};
  const bool uses_send = dev.count > 0 && !(dev.coll == sched::Coll::Broadcast && rank_ != dev.root);
  const bool uses_recv = dev.count > 0 && !(dev.coll == sched::Coll::Reduce && rank_ != dev.root);
  StagingLayout layout;
  if (uses_send) layout.add(dev.send, sched::send_count(b) * esize, true, false);
  if (uses_recv) layout.add(dev.recv, sched::recv_count(b) * esize, false, true);
  return stage_on_stream(sched::coll_name(dev.coll), stream, layout, [&](unsigned char* base) {
    CollArgs host = dev;
    host.send = uses_send ? layout.host(base, dev.send) : nullptr;
    host.recv = uses_recv ? layout.host(base, dev.recv) : nullptr;
    return std::make_unique<CollOp>(this, host, nullptr);
  });
}

Status Communicator::enqueue_p2p(const std::vector<exec::P2P>& ops, const std::vector<exec::LocalCopy>& copies,
                                 void* stream) {
  WEFT_TRY(async_error());
  StagingLayout layout;
  for (const exec::P2P& op : ops) layout.add(op.buf, op.bytes, op.send, !op.send);
  for (const exec::LocalCopy& c : copies) {
    layout.add(c.src, c.bytes, true, false);
    layout.add(c.dst, c.bytes, false, true);
  }
  return stage_on_stream("point-to-point", stream, layout, [&](unsigned char* base) {
    std::vector<exec::P2P> host_ops = ops;
    for (exec::P2P& op : host_ops) op.buf = layout.host(base, op.buf);
    std::vector<exec::LocalCopy> host_copies = copies;
    for (exec::LocalCopy& c : host_copies) {
      c.dst = layout.host(base, c.dst);
      c.src = layout.host(base, c.src);
    }
    return std::make_unique<P2POp>(this, std::move(host_ops), std::move(host_copies), nullptr);
  });
}

}  // namespace weft
