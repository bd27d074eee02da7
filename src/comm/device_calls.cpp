// Communicator::enqueue and enqueue_p2p: operations on device memory, staged
// through pinned host memory and ordered on the caller's stream
// (device_staging.h).
#include <algorithm>
#include <memory>
#include <vector>

#include "base/log.h"
#include "base/params.h"
#include "comm/communicator.h"
#include "comm/device_kernels.h"
#include "comm/device_p2p.h"
#include "comm/operations.h"
#include "comm/staging_layout.h"
#include "exec/cuda_driver.h"

namespace weft {
namespace {

using exec::cuda::dptr;

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

Status Communicator::stream_step(int rc, DeviceStaging::Slot* slot, const char* what, void* stream,
                                 const char* doing) {
  if (rc == 0) return Status::Ok();
  // The stream is now out of step with the engine: the communicator fails (its
  // peers learn of it through the bootstrap) and the slot is never reused.
  Status st = Error(weftUnhandledCudaError, "%s on stream %p: %s: %s", what, stream, doing,
                    exec::cuda::error_text(rc).c_str());
  slot->abandoned = true;
  fail(st);
  return st;
}

template <class Op>
Status Communicator::stage_in(const exec::cuda::Api& d, const char* what, void* stream, const StagingLayout& layout,
                              DeviceStaging::Slot* slot, uint32_t gen, std::unique_ptr<Op> op) {
  unsigned char* base = slot->data();
  WEFT_TRY(layout.each(true, [&](void* dev, size_t bytes, size_t at) {
    return stream_step(d.copy_async(dptr(base + at), dptr(dev), bytes, stream), slot, what, stream,
                       "copying the input to pinned memory");
  }));
  WEFT_TRY(stream_step(d.write_value32(stream, slot->flag_dev(DeviceStaging::kStaged), gen, 0), slot, what, stream,
                       "signalling the staged input"));
  op->stage(slot, gen, timeout_ms_);
  queue_->post(std::move(op));
  return Status::Ok();
}

Status Communicator::stage_out(const exec::cuda::Api& d, const char* what, void* stream, const StagingLayout& layout,
                               DeviceStaging::Slot* slot, uint32_t gen) {
  unsigned char* base = slot->data();
  WEFT_TRY(stream_step(d.wait_value32(stream, slot->flag_dev(DeviceStaging::kDone), gen, exec::cuda::kWaitValueGeq),
                       slot, what, stream, "waiting for the staged result"));
  WEFT_TRY(layout.each(false, [&](void* dev, size_t bytes, size_t at) {
    return stream_step(d.copy_async(dptr(dev), dptr(base + at), bytes, stream), slot, what, stream,
                       "copying the result back");
  }));
  return stream_step(d.write_value32(stream, slot->flag_dev(DeviceStaging::kFree), gen, 0), slot, what, stream,
                     "releasing the staging slot");
}

// One slot for the whole layout: the copies in, the operation make_op(slot
// data) makes, the copies back.
template <class MakeOp>
Status Communicator::stage_on_stream(const char* what, void* stream, StagingLayout& layout, MakeOp make_op) {
  const exec::cuda::Api* d = nullptr;
  WEFT_TRY(stream_driver(what, stream, &d));
  DeviceStaging::Slot* slot = nullptr;
  WEFT_TRY(staging_.take(*d, layout.place(), &slot));
  const uint32_t gen = slot->gen;
  WEFT_TRY(stage_in(*d, what, stream, layout, slot, gen, make_op(slot->data())));
  return stage_out(*d, what, stream, layout, slot, gen);
}

// A large all-reduce, broadcast or reduce works element by element: it goes in
// chunks of WEFT_DEVICE_CHUNK_BYTES through two slots used in turn, queued so
// that the stream copies chunk i + 2 in and chunk i back while the engine runs
// chunk i + 1. A slot is reused in stream order (its next copy in comes after
// its copy back) and in queue order (its next chunk runs after the last), so
// its flags simply count on, and no call waits for the GPU.
Status Communicator::enqueue_chunked(const CollArgs& dev, void* stream, size_t per) {
  const char* what = sched::coll_name(dev.coll);
  const exec::cuda::Api* d = nullptr;
  WEFT_TRY(stream_driver(what, stream, &d));
  const size_t esize = reduce::dtype_size(dev.dtype);
  const size_t nchunks = (dev.count + per - 1) / per;
  const bool uses_send = this->uses_send(dev), uses_recv = this->uses_recv(dev);
  auto layout_of = [&](size_t i) {
    const size_t first = i * per, bytes = std::min(per, dev.count - first) * esize;
    StagingLayout l;
    if (uses_send) l.add(static_cast<const unsigned char*>(dev.send) + first * esize, bytes, true, false);
    if (uses_recv) l.add(static_cast<unsigned char*>(dev.recv) + first * esize, bytes, false, true);
    l.place();
    return l;
  };
  const size_t cap = static_cast<size_t>(std::max<int64_t>(1, params::DEVICE_STAGING_SLOTS()));
  const size_t nslots = std::min<size_t>({2, cap, nchunks});
  DeviceStaging::Slot* slots[2] = {nullptr, nullptr};
  for (size_t k = 0; k < nslots; ++k) WEFT_TRY(staging_.take(*d, layout_of(0).place(), &slots[k]));
  std::vector<StagingLayout> layouts(nchunks);
  std::vector<uint32_t> gens(nchunks);
  auto in = [&](size_t i) {
    DeviceStaging::Slot* slot = slots[i % nslots];
    gens[i] = i < nslots ? slot->gen : staging_.reuse(slot);
    layouts[i] = layout_of(i);
    const size_t first = i * per;
    CollArgs host = dev;
    host.count = std::min(per, dev.count - first);
    host.send = uses_send ? layouts[i].host(slot->data(), static_cast<const unsigned char*>(dev.send) + first * esize)
                          : nullptr;
    host.recv = uses_recv ? layouts[i].host(slot->data(), static_cast<unsigned char*>(dev.recv) + first * esize)
                          : nullptr;
    return stage_in(*d, what, stream, layouts[i], slot, gens[i], std::make_unique<CollOp>(this, host, nullptr));
  };
  for (size_t i = 0; i < nslots; ++i) WEFT_TRY(in(i));
  for (size_t i = 0; i < nchunks; ++i) {
    WEFT_TRY(stage_out(*d, what, stream, layouts[i], slots[i % nslots], gens[i]));
    if (i + nslots < nchunks) WEFT_TRY(in(i + nslots));
  }
  return Status::Ok();
}

Status Communicator::choose_device_path(const exec::cuda::Api& d) {
  device_path_chosen_ = true;
  transport::cuda_p2p::Group::Options o;
  o.rank = rank_;
  o.nranks = nranks_;
  o.host_hash = host_hash_;
  o.buffer_bytes = static_cast<size_t>(std::max<int64_t>(0, params::P2P_BUFFER_BYTES()));
  if (const char* why = kernels_missing(d)) o.kernels_missing = why;
  o.timeout_ms = timeout_ms_;
  o.on_timeout = [this](const Status& st) { fail(st); };
  const std::string& level = params::P2P_LEVEL();
  static const char* const kLevels[] = {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS"};
  if (std::find_if(std::begin(kLevels), std::end(kLevels), [&](const char* l) { return level == l; }) ==
      std::end(kLevels))
    return Error(weftInvalidArgument, "WEFT_P2P_LEVEL=%s: expected LOC, NVL, PIX, PXB, PHB or SYS", level.c_str());
  o.same_gpu_only = level == "LOC";
  if (params::P2P_DISABLE() != 0) o.disabled_by = "WEFT_P2P_DISABLE=1";
  transport::cuda_p2p::Card mine;
  p2p_.prepare(d, o, &mine);
  std::vector<transport::cuda_p2p::Card> cards(static_cast<size_t>(nranks_));
  WEFT_TRY(run(CollArgs{sched::Coll::AllGather, &mine, cards.data(), sizeof(mine), weftUint8}));
  // Each rank's verdict on reaching all the others; cuda_p2p only if all can.
  struct Verdict {
    char why[240];
  } verdict{};
  std::snprintf(verdict.why, sizeof(verdict.why), "%s", p2p_.connect(cards).c_str());
  std::vector<Verdict> verdicts(static_cast<size_t>(nranks_));
  WEFT_TRY(run(CollArgs{sched::Coll::AllGather, &verdict, verdicts.data(), sizeof(verdict), weftUint8}));
  std::string why;
  for (int r = 0; r < nranks_ && why.empty(); ++r)
    if (verdicts[static_cast<size_t>(r)].why[0] != 0)
      why = "rank " + std::to_string(r) + " sees " + verdicts[static_cast<size_t>(r)].why;
  p2p_.settle(why.empty());
  if (why.empty())
    WEFT_INFO(TRANSPORT, "rank %d: device collectives over cuda_p2p (%s)", rank_, p2p_.how().c_str());
  else
    WEFT_INFO(TRANSPORT, "rank %d: device collectives staged through pinned host memory: %s", rank_, why.c_str());
  return why.empty() ? Status::Ok() : split_device_levels(d);
}

Status Communicator::enqueue(const CollArgs& dev, void* stream) {
  WEFT_TRY(validate(dev, true));
  WEFT_TRY(async_error());
  if (!device_path_chosen_) {
    const exec::cuda::Api* d = nullptr;
    WEFT_TRY(stream_driver(sched::coll_name(dev.coll), stream, &d));
    WEFT_TRY(choose_device_path(*d));
  }
  if (p2p_.active() && p2p_serves(dev)) {
    Status st = p2p_collective(p2p_, dev, stream);
    if (!st.ok()) fail(st);  // the stream is out of step with the peers' now
    return st;
  }
  if (device_levels_.load(std::memory_order_relaxed) &&
      ((dev.coll == sched::Coll::AllReduce && dev.op < weftNumOps) || dev.coll == sched::Coll::Broadcast ||
       dev.coll == sched::Coll::AllGather || dev.coll == sched::Coll::AllToAll ||
       ((dev.coll == sched::Coll::ReduceScatter || dev.coll == sched::Coll::Reduce) && dev.op < weftNumOps)))
    return enqueue_across_hosts(dev, stream);
  return enqueue_staged(dev, stream);
}

Status Communicator::enqueue_staged(const CollArgs& dev, void* stream) {
  const bool elementwise = dev.coll == sched::Coll::AllReduce || dev.coll == sched::Coll::Broadcast ||
                           dev.coll == sched::Coll::Reduce;
  const size_t per = std::max<size_t>(
      1, static_cast<size_t>(std::max<int64_t>(1, params::DEVICE_CHUNK_BYTES())) / reduce::dtype_size(dev.dtype));
  if (elementwise && dev.count > per) return enqueue_chunked(dev, stream, per);
  // The bytes the call reads and writes on this rank. Buffers in the in-place
  // position merge into one segment, so the host call is in place too.
  const size_t esize = reduce::dtype_size(dev.dtype);
  const sched::BuildArgs b{dev.coll, nranks_, dev.count, dev.root, 0};
  const bool uses_send = dev.count > 0 && this->uses_send(dev), uses_recv = dev.count > 0 && this->uses_recv(dev);
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

Status Communicator::split_device_levels(const exec::cuda::Api& d) {
  // Hosts of equal size holding consecutive ranks (local_size_), more than one
  // rank each: host h's ranks are h * L .. h * L + L - 1.
  // Every rank decides alike (local_size_ comes from every rank's card);
  // WEFT_P2P_DISABLE, which may differ, acts in the hosts' own choice below.
  const int L = local_size_;
  if (L <= 1 || L >= nranks_) return Status::Ok();
  weftConfig_t config = WEFT_CONFIG_INITIALIZER;
  config.timeoutMs = static_cast<int>(std::min<int64_t>(timeout_ms_, INT32_MAX));
  auto make = [&](int color, std::unique_ptr<Communicator>* out) -> Status {
    boot::UniqueId id;
    int n = 0, r = 0;
    Lineage lineage;
    std::unique_ptr<boot::Bootstrap> boot;
    WEFT_TRY(split(color, rank_, &id, &n, &r, &lineage, &boot));
    return create(id, n, r, &config, out, lineage, std::move(boot));
  };
  std::unique_ptr<Communicator> local, cross;
  WEFT_TRY(make(rank_ / L, &local));
  WEFT_TRY(make(rank_ % L, &cross));
  WEFT_TRY(local->choose_device_path(d));
  // Every host's ranks must reach each other; else every call stays staged.
  uint8_t mine = local->p2p_.active() ? 1 : 0;
  std::vector<uint8_t> all(static_cast<size_t>(nranks_));
  WEFT_TRY(run(CollArgs{sched::Coll::AllGather, &mine, all.data(), 1, weftUint8}));
  const auto without = std::find(all.begin(), all.end(), uint8_t{0});
  if (without != all.end()) {
    WEFT_INFO(TRANSPORT, "rank %d: device calls staged across hosts: rank %d's host cannot use cuda_p2p",
              rank_, static_cast<int>(without - all.begin()));
    return Status::Ok();
  }
  device_local_ = std::move(local);
  device_cross_ = std::move(cross);
  device_levels_.store(true, std::memory_order_release);
  WEFT_INFO(TRANSPORT,
            "rank %d: device collectives across hosts: cuda_p2p within each host of %d ranks, staged across the %d "
            "hosts",
            rank_, L, nranks_ / L);
  return Status::Ok();
}

Status Communicator::enqueue_across_hosts(const CollArgs& dev, void* stream) {
  if (dev.coll == sched::Coll::AllGather) {
    if (dev.count == 0) return Status::Ok();
    // Each rank's block crosses the network once per host: the ranks of one local
    // rank gather theirs (staged) into M blocks of the receive buffer that do not
    // hold this rank's own (the in-place input), then each host's ranks swap
    // those over cuda_p2p into rank order.
    const size_t esize = reduce::dtype_size(dev.dtype), c = dev.count;
    const int L = local_size_, M = nranks_ / L;
    const int start = rank_ + 1 + M <= nranks_ ? rank_ + 1 : rank_ - M;
    auto* temp = static_cast<unsigned char*>(dev.recv) + static_cast<size_t>(start) * c * esize;
    Status st = device_cross_->enqueue(CollArgs{sched::Coll::AllGather, dev.send, temp, c, dev.dtype}, stream);
    if (st.ok())
      st = p2p_gather_by_host(device_local_->p2p_, temp, dev.recv, c, dev.dtype, M,
                              static_cast<exec::cuda::Stream>(stream));
    if (!st.ok()) {
      device_local_->fail(st);
      fail(st);
    }
    return st;
  }
  if (dev.coll == sched::Coll::ReduceScatter) {
    // Per round of each block's elements: the host's ranks reduce the blocks of
    // the ranks of this rank's local rank over cuda_p2p, then those ranks
    // reduce-scatter the results across hosts (staged). Avg sums all the way and
    // divides once at the end.
    const size_t esize = reduce::dtype_size(dev.dtype), c = dev.count;
    const int M = nranks_ / local_size_;
    const weftRedOp_t op = dev.op == weftAvg ? weftSum : dev.op;
    const size_t per = p2p_round_elems(device_local_->p2p_, dev.dtype, nranks_);
    Status st;
    for (size_t first = 0; first < c && st.ok(); first += per) {
      const size_t m = std::min(per, c - first);
      void* sums = nullptr;
      st = p2p_reduce_by_host(device_local_->p2p_, dev.send, c, dev.dtype, op, M, first, m,
                              static_cast<exec::cuda::Stream>(stream), &sums);
      if (!st.ok()) device_local_->fail(st);
      if (st.ok())
        st = device_cross_->enqueue(
            CollArgs{sched::Coll::ReduceScatter, sums, static_cast<unsigned char*>(dev.recv) + first * esize, m,
                     dev.dtype, op},
            stream);
    }
    if (st.ok() && dev.op == weftAvg && c > 0)
      st = divide_on_stream(*exec::cuda::api(), dev.recv, c, dev.dtype, nranks_, static_cast<exec::cuda::Stream>(stream));
    if (!st.ok()) fail(st);
    return st;
  }
  if (dev.coll == sched::Coll::AllToAll) {
    if (dev.count == 0) return Status::Ok();
    // The input is host-major: the ranks of one local rank swap, across hosts
    // (staged), the L blocks each holds for every host, into the receive buffer;
    // then each host's ranks transpose those over cuda_p2p into their places.
    const int L = local_size_, M = nranks_ / L;
    Status st = device_cross_->enqueue(
        CollArgs{sched::Coll::AllToAll, dev.send, dev.recv, dev.count * static_cast<size_t>(L), dev.dtype}, stream);
    if (st.ok())
      st = p2p_transpose_by_host(device_local_->p2p_, dev.recv, dev.count, dev.dtype, M,
                                 static_cast<exec::cuda::Stream>(stream));
    if (!st.ok()) {
      device_local_->fail(st);
      fail(st);
    }
    return st;
  }
  if (dev.coll == sched::Coll::Reduce) {
    // Per round: each host's ranks reduce over cuda_p2p onto the root's local
    // rank, and those reduce across hosts (staged) onto the root. Avg sums all
    // the way; the root divides at the end.
    const size_t esize = reduce::dtype_size(dev.dtype), c = dev.count;
    const int root_host = dev.root / local_size_, root_local = dev.root % local_size_;
    const weftRedOp_t op = dev.op == weftAvg ? weftSum : dev.op;
    const size_t per = p2p_round_elems(device_local_->p2p_, dev.dtype, 1);
    const bool crosses = device_local_->rank() == root_local;
    Status st;
    for (size_t first = 0; first < c && st.ok(); first += per) {
      const size_t m = std::min(per, c - first);
      void* sums = nullptr;
      st = p2p_reduce_for_host(device_local_->p2p_, dev.send, dev.dtype, op, root_local, first, m,
                               static_cast<exec::cuda::Stream>(stream), &sums);
      if (!st.ok()) device_local_->fail(st);
      if (st.ok() && crosses)
        st = device_cross_->enqueue(CollArgs{sched::Coll::Reduce, sums,
                                             rank_ == dev.root ? static_cast<unsigned char*>(dev.recv) + first * esize
                                                               : nullptr,
                                             m, dev.dtype, op, root_host},
                                    stream);
    }
    if (st.ok() && dev.op == weftAvg && rank_ == dev.root && c > 0)
      st = divide_on_stream(*exec::cuda::api(), dev.recv, c, dev.dtype, nranks_, static_cast<exec::cuda::Stream>(stream));
    if (!st.ok()) fail(st);
    return st;
  }
  if (dev.coll == sched::Coll::Broadcast) {
    // The root's local rank on every host gets it across hosts (staged), then
    // each host's ranks from that one over cuda_p2p.
    const int root_host = dev.root / local_size_, root_local = dev.root % local_size_;
    Status st;
    if (dev.count > 0 && device_local_->rank() == root_local)
      st = device_cross_->enqueue(
          CollArgs{sched::Coll::Broadcast, dev.send, dev.recv, dev.count, dev.dtype, weftSum, root_host}, stream);
    if (st.ok() && dev.count > 0)
      st = device_local_->enqueue(
          CollArgs{sched::Coll::Broadcast, dev.recv, dev.recv, dev.count, dev.dtype, weftSum, root_local}, stream);
    if (!st.ok()) fail(st);  // part of the call may be on the stream
    return st;
  }
  const size_t esize = reduce::dtype_size(dev.dtype), L = static_cast<size_t>(local_size_);
  const size_t chunk = dev.count / L, whole = chunk * L;
  const auto* send = static_cast<const unsigned char*>(dev.send);
  auto* recv = static_cast<unsigned char*>(dev.recv);
  Status st;
  if (chunk > 0) {
    // Sums all the way (the average divides once, by every rank, at the end).
    const weftRedOp_t op = dev.op == weftAvg ? weftSum : dev.op;
    unsigned char* mine = recv + static_cast<size_t>(device_local_->rank()) * chunk * esize;
    st = device_local_->enqueue(CollArgs{sched::Coll::ReduceScatter, send, mine, chunk, dev.dtype, op}, stream);
    if (st.ok()) st = device_cross_->enqueue(CollArgs{sched::Coll::AllReduce, mine, mine, chunk, dev.dtype, op}, stream);
    if (st.ok() && dev.op == weftAvg)
      st = divide_on_stream(*exec::cuda::api(), mine, chunk, dev.dtype, nranks_, static_cast<exec::cuda::Stream>(stream));
    if (st.ok()) st = device_local_->enqueue(CollArgs{sched::Coll::AllGather, mine, recv, chunk, dev.dtype}, stream);
    if (!st.ok()) {
      // Part of the call is on the stream: it is out of step with the peers'.
      fail(st);
      return st;
    }
  }
  if (dev.count == whole) return Status::Ok();
  CollArgs tail = dev;
  tail.send = send + whole * esize;
  tail.recv = recv + whole * esize;
  tail.count = dev.count - whole;
  return enqueue_staged(tail, stream);
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
