// Communicator::enqueue and enqueue_p2p: operations on device memory, staged
// through pinned host memory and ordered on the caller's stream
// (device_staging.h).
#include <algorithm>
#include <cstdio>
#include <cstring>
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
#include "topo/nvml.h"
#include "tune/device_cost.h"

namespace weft {
namespace {

using exec::cuda::dptr;

// Bootstrap group tags of the pairs of point-to-point on device memory (splits
// number theirs from 0 up, with the color in the low half).
constexpr uint64_t kPairTag = uint64_t{1} << 63;

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

// Whether the stream is being captured into a CUDA graph.
Status capture_status(const exec::cuda::Api& d, const char* what, void* stream, bool* on) {
  const int rc = exec::cuda::stream_capturing(d, stream, on);
  if (rc != 0)
    return Error(weftInvalidUsage, "%s on stream %p: cuStreamIsCapturing: %s (a stream capture elsewhere in the "
                 "process?)", what, stream, exec::cuda::error_text(rc).c_str());
  return Status::Ok();
}

// Point-to-point calls cannot be captured: their flags carry totals counted at
// enqueue, so a replayed graph would find its waits already met; staged calls
// would wait for a stream that does not run during capture.
Status refuse_capture(const exec::cuda::Api& d, const char* what, void* stream) {
  bool on = false;
  WEFT_TRY(capture_status(d, what, stream, &on));
  if (on)
    return Error(weftInvalidUsage, "%s on stream %p: the stream is being captured into a CUDA graph, and weft's device "
                 "point-to-point calls cannot be captured yet (their flags count messages when enqueued); call it "
                 "outside the capture", what, stream);
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
  WEFT_TRY(staging_.take(*d, layout.place(), what, &slot));
  const uint32_t gen = slot->gen;
  WEFT_TRY(stage_in(*d, what, stream, layout, slot, gen, make_op(slot->data())));
  return stage_out(*d, what, stream, layout, slot, gen);
}

// A large call goes in chunks through two slots used in turn, queued so that
// the stream copies chunk i + 2 in and chunk i back while the engine runs chunk
// i + 1. A slot is reused in stream order (its next copy in comes after its
// copy back) and in queue order (its next chunk runs after the last), so its
// flags simply count on, and no call waits for the GPU. Chunk 0 is the largest.
template <class LayoutOf, class OpOf>
Status Communicator::enqueue_chunked(const char* what, void* stream, size_t nchunks, LayoutOf layout_of, OpOf op_of,
                                     const ChunkHook* before, const ChunkHook* after) {
  const exec::cuda::Api* d = nullptr;
  WEFT_TRY(stream_driver(what, stream, &d));
  const size_t cap = static_cast<size_t>(std::max<int64_t>(1, params::DEVICE_STAGING_SLOTS()));
  const size_t nslots = std::min<size_t>({2, cap, nchunks});
  DeviceStaging::Slot* slots[2] = {nullptr, nullptr};
  bool used[2] = {false, false};  // whether stream work of this call refers to the slot
  Status st;
  for (size_t k = 0; k < nslots && st.ok(); ++k) st = staging_.take(*d, layout_of(0).place(), what, &slots[k]);
  std::vector<StagingLayout> layouts(nchunks);
  std::vector<uint32_t> gens(nchunks);
  auto in = [&](size_t i) -> Status {
    if (before != nullptr) WEFT_TRY((*before)(i));
    DeviceStaging::Slot* slot = slots[i % nslots];
    used[i % nslots] = true;
    gens[i] = i < nslots ? slot->gen : staging_.reuse(slot);
    layouts[i] = layout_of(i);
    layouts[i].place();
    return stage_in(*d, what, stream, layouts[i], slot, gens[i], op_of(i, layouts[i], slot->data()));
  };
  for (size_t i = 0; i < nslots && st.ok(); ++i) st = in(i);
  for (size_t i = 0; i < nchunks && st.ok(); ++i) {
    st = stage_out(*d, what, stream, layouts[i], slots[i % nslots], gens[i]);
    if (st.ok() && after != nullptr) st = (*after)(i);
    if (st.ok() && i + nslots < nchunks) st = in(i + nslots);
  }
  // A failed step failed the communicator. A slot this call's stream work
  // refers to may still be read by the stream, which will not free it: it stays
  // (abandoned); one the call took but never used is free again.
  if (!st.ok())
    for (size_t k = 0; k < nslots; ++k) {
      if (slots[k] == nullptr) continue;
      if (used[k]) slots[k]->abandoned = true;
      else staging_.untake(slots[k]);
    }
  return st;
}

Status Communicator::enqueue_allreduce_rounds(void* stream, weftDataType_t dtype, weftRedOp_t op, size_t rounds,
                                              const std::function<std::pair<void*, size_t>(size_t)>& at,
                                              const ChunkHook& before, const ChunkHook& after) {
  const size_t esize = reduce::dtype_size(dtype);
  return enqueue_chunked(
      "allreduce", stream, rounds,
      [&](size_t i) {
        StagingLayout l;
        l.add(at(i).first, at(i).second * esize, true, true);
        return l;
      },
      [&](size_t i, const StagingLayout& l, unsigned char* base) {
        const auto [p, count] = at(i);
        void* host = l.host(base, p);
        return std::make_unique<CollOp>(this, CollArgs{sched::Coll::AllReduce, host, host, count, dtype, op}, nullptr);
      },
      &before, &after);
}

// cuda_p2p with device buffers where every rank reaches every other's GPU
// memory; else, on one host, with buffers in pinned host memory (as NCCL's SHM
// transport: the GPUs reduce and copy through it, no host thread in the data
// path); else staged through the host collectives.
Status Communicator::choose_device_path(const exec::cuda::Api& d) {
  device_path_chosen_ = true;
  const std::string& level = params::P2P_LEVEL();
  static const char* const kLevels[] = {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS"};
  if (std::find_if(std::begin(kLevels), std::end(kLevels), [&](const char* l) { return level == l; }) ==
      std::end(kLevels))
    return Error(weftInvalidArgument, "WEFT_P2P_LEVEL=%s: expected LOC, NVL, PIX, PXB, PHB or SYS", level.c_str());
  std::string why;
  const bool one_host = std::find(same_host_.begin(), same_host_.end(), false) == same_host_.end();
  for (const bool host_buffers : {false, true}) {
    if (host_buffers && !one_host) break;
    transport::cuda_p2p::Group::Options o;
    o.rank = rank_;
    o.nranks = nranks_;
    o.host_hash = host_hash_;
    o.buffer_bytes = static_cast<size_t>(std::max<int64_t>(0, params::P2P_BUFFER_BYTES()));
    if (const char* missing = kernels_missing(d)) o.kernels_missing = missing;
    o.timeout_ms = timeout_ms_;
    o.on_timeout = [this](const Status& st) { fail(st); };
    o.same_gpu_only = level == "LOC";
    o.host_buffers = host_buffers;
    if (!host_buffers && params::P2P_DISABLE() != 0) o.disabled_by = "WEFT_P2P_DISABLE=1";
    if (host_buffers && params::SHM_DISABLE() != 0) o.disabled_by = "WEFT_SHM_DISABLE=1";
    std::string tried;
    WEFT_TRY(try_device_group(d, o, &tried));
    if (tried.empty()) {
      WEFT_INFO(TRANSPORT, "rank %d: device collectives over cuda_p2p (%s; link class %s)", rank_, p2p_.how().c_str(),
                tune::link_class_name(p2p_link_));
      return Status::Ok();
    }
    why += (why.empty() ? "" : "; with host buffers: ") + tried;
  }
  WEFT_INFO(TRANSPORT, "rank %d: device collectives staged through pinned host memory: %s", rank_, why.c_str());
  return split_device_levels(d);
}

// One try at the group (collective): each rank prepares and maps the others,
// and all agree; *why_not "" when the group is active, else the first rank's
// reason (the same on every rank).
Status Communicator::try_device_group(const exec::cuda::Api& d, const transport::cuda_p2p::Group::Options& o,
                                      std::string* why_not) {
  transport::cuda_p2p::Card mine;
  p2p_.prepare(d, o, &mine);
  std::vector<transport::cuda_p2p::Card> cards(static_cast<size_t>(nranks_));
  WEFT_TRY(run(CollArgs{sched::Coll::AllGather, &mine, cards.data(), sizeof(mine), weftUint8}));
  // Each rank's verdict on reaching all the others; the group only if all can.
  struct Verdict {
    char why[240];
    uint8_t link;  // tune::LinkClass: gpu, nvl, p2p or stg
  } verdict{};
  std::snprintf(verdict.why, sizeof(verdict.why), "%s", p2p_.connect(cards).c_str());
  // And its link to the others' GPUs: through host memory; the same GPU; NVLink to
  // each (NVML); else PCIe.
  std::vector<std::string> others;
  const std::string gpu = mine.bus_id;
  for (const transport::cuda_p2p::Card& c : cards)
    if (c.bus_id != gpu && std::find(others.begin(), others.end(), c.bus_id) == others.end())
      others.emplace_back(c.bus_id);
  verdict.link = static_cast<uint8_t>(o.host_buffers   ? tune::LinkClass::Stg
                                      : others.empty() ? tune::LinkClass::Gpu
                                      : topo::nvlink_peers(gpu, others).size() == others.size()
                                          ? tune::LinkClass::Nvl
                                          : tune::LinkClass::Pcie);
  std::vector<Verdict> verdicts(static_cast<size_t>(nranks_));
  WEFT_TRY(run(CollArgs{sched::Coll::AllGather, &verdict, verdicts.data(), sizeof(verdict), weftUint8}));
  why_not->clear();
  uint8_t slowest = verdict.link;  // the device classes are declared fastest first
  for (int r = 0; r < nranks_; ++r) {
    const Verdict& v = verdicts[static_cast<size_t>(r)];
    if (v.why[0] != 0 && why_not->empty()) *why_not = "rank " + std::to_string(r) + " sees " + v.why;
    slowest = std::max(slowest, v.link);
  }
  p2p_link_ = static_cast<tune::LinkClass>(slowest);
  p2p_.settle(why_not->empty());
  return Status::Ok();
}

Status Communicator::share_device_window(void* buff, size_t size) {
  const exec::cuda::Api* d = nullptr;
  WEFT_TRY(stream_driver("weftCommWindowRegister", nullptr, &d));
  if (!device_path_chosen_) WEFT_TRY(choose_device_path(*d));
  if (!p2p_.active()) {
    WEFT_INFO(TRANSPORT, "rank %d: window of %zu bytes at %p: device calls on it are staged like the others", rank_,
              size, buff);
    return Status::Ok();
  }
  std::string why_not;
  WEFT_TRY(p2p_.add_window(
      buff, size,
      [&](const void* mine, void* all, size_t bytes) {
        return boot_->allgather(mine, bytes, all, Deadline::after_ms(timeout_ms_));
      },
      &why_not));
  if (why_not.empty())
    WEFT_INFO(TRANSPORT, "rank %d: window of %zu bytes at %p mapped by every rank over cuda_p2p", rank_, size, buff);
  else
    WEFT_INFO(TRANSPORT, "rank %d: window of %zu bytes at %p not shared over cuda_p2p (%s): calls on it copy through "
              "the buffers", rank_, size, buff, why_not.c_str());
  return Status::Ok();
}

bool Communicator::p2p_oneshot(const CollArgs& dev, WindowUse use) {
  const uint64_t bytes = dev.count * reduce::dtype_size(dev.dtype);
  const int64_t forced = params::P2P_ONESHOT_BYTES();
  const bool windows = use != WindowUse::None;
  const algo::LinkCost c = tuner_->table().lookup(p2p_link_, sched::Coll::AllReduce, "*", nranks_, bytes);
  const tune::DeviceTerms terms[2] = {
      tune::p2p_allreduce_cost(true, nranks_, bytes, p2p_.buffer_bytes(), p2p_link_, c, windows),
      tune::p2p_allreduce_cost(false, nranks_, bytes, p2p_.buffer_bytes(), p2p_link_, c, windows)};
  bool oneshot = forced >= 0 ? bytes <= static_cast<uint64_t>(forced) : terms[0].total() <= terms[1].total();
  std::string how = windows ? "on symmetric windows" : "";
  if (use == WindowUse::OneShot) {
    oneshot = true;
    how += " (one-shot: the output is not in a window)";
  } else if (use == WindowUse::TwoShot) {
    oneshot = false;
    how += " (two-shot: the output overlaps the input)";
  }
  if (tuner_->explaining()) {
    std::lock_guard<std::mutex> lock(device_explain_mu_);
    if (device_explained_.insert(tune::size_class(bytes)).second)
      std::fputs(tune::explain_p2p_allreduce(nranks_, bytes, p2p_link_, c, terms, oneshot, forced, how).c_str(),
                 stderr);
  }
  return oneshot;
}

Status Communicator::enqueue(const CollArgs& dev, void* stream) {
  WEFT_TRY(validate(dev, true));
  WEFT_TRY(async_error());
  const exec::cuda::Api* d = nullptr;
  WEFT_TRY(stream_driver(sched::coll_name(dev.coll), stream, &d));
  const char* what = sched::coll_name(dev.coll);
  bool captured = false;
  WEFT_TRY(capture_status(*d, what, stream, &captured));
  if (captured && !device_path_chosen_)
    return Error(weftInvalidUsage, "%s on stream %p: the stream is being captured into a CUDA graph before this "
                 "communicator's first device collective, which maps the peers' memory (not allowed during a capture); "
                 "run one device collective outside the capture first (a warm-up iteration)", what, stream);
  if (!device_path_chosen_) WEFT_TRY(choose_device_path(*d));
  if (p2p_.active() && p2p_serves(dev)) {
    const WindowUse use = p2p_window_use(p2p_, dev);
    const bool on_windows = use != WindowUse::None;
    Status st = p2p_collective(p2p_, dev, stream, dev.coll == sched::Coll::AllReduce && p2p_oneshot(dev, use),
                               on_windows, captured);
    if (!st.ok()) fail(st);  // the stream is out of step with the peers' now
    const uint32_t bit = 1u << static_cast<unsigned>(dev.coll);
    if (st.ok() && on_windows && (windowed_said_.fetch_or(bit) & bit) == 0)
      WEFT_INFO(TRANSPORT, "rank %d: %s on symmetric windows over cuda_p2p: the peers' windows read in place", rank_,
                sched::coll_name(dev.coll));
    return st;
  }
  if (captured)
    return Error(weftInvalidUsage, "%s on stream %p: the stream is being captured into a CUDA graph, and only "
                 "collectives over cuda_p2p can be captured (%s); call it outside the capture", what, stream,
                 !p2p_.active()  ? "this communicator's device calls are staged through pinned host memory"
                 : dev.op >= weftNumOps ? "pre-multiplied sums are staged through pinned host memory"
                                        : "this collective is staged through pinned host memory");
  bool levels = false;
  int rounds = 1;
  if (levels_serve(dev)) WEFT_TRY(device_plan(dev, &levels, &rounds));
  return levels ? enqueue_across_hosts(dev, stream, rounds) : enqueue_staged(dev, stream);
}

Status Communicator::estimate_device(const CollArgs& dev, double* seconds) {
  if (!device_path_chosen_)
    return Error(weftInvalidUsage, "weftGroupSimulateEnd: %s on device memory: no estimate before this communicator's "
                 "first device collective, which chooses the path of its device calls (collectively)",
                 sched::coll_name(dev.coll));
  const uint64_t bytes = dev.count * reduce::dtype_size(dev.dtype);
  if (p2p_.active() && p2p_serves(dev)) {
    const WindowUse use = p2p_window_use(p2p_, dev);
    const algo::LinkCost c = tuner_->table().lookup(p2p_link_, dev.coll, "*", nranks_, bytes);
    const tune::DeviceTerms t =
        dev.coll == sched::Coll::AllReduce
            ? tune::p2p_allreduce_cost(p2p_oneshot(dev, use), nranks_, bytes, p2p_.buffer_bytes(), p2p_link_, c,
                                       use != WindowUse::None)
            : tune::p2p_collective_cost(dev.coll, nranks_, bytes, p2p_.buffer_bytes(), p2p_link_, c,
                                        use != WindowUse::None);
    *seconds = t.total();
    return Status::Ok();
  }
  if (levels_serve(dev)) {
    bool levels = false;
    int rounds = 1;
    tune::DevicePlanCost cost;
    WEFT_TRY(device_plan(dev, &levels, &rounds, &cost));
    if (levels) {
      *seconds = cost.levels_plan();
      return Status::Ok();
    }
  }
  double host = 0;
  WEFT_TRY(estimate(dev, &host));
  *seconds = host + staging_copies(dev);
  return Status::Ok();
}

double Communicator::staging_copies(const CollArgs& a) const {
  const sched::BuildArgs b{a.coll, nranks_, a.count, a.root, 0};
  return tune::staging_copies_cost((sched::send_count(b) + sched::recv_count(b)) * reduce::dtype_size(a.dtype),
                                   tuner_->table().base.of(tune::LinkClass::Stg));
}

// All-reduce, broadcast and reduce larger than WEFT_DEVICE_CHUNK_BYTES go in
// chunks of that many bytes, element by element. All-gather, reduce-scatter
// and all-to-all whose larger side is (n blocks of `count`) go by elements
// [first, first + m) of every block, m * n elements about that size: a chunk
// gathers the pieces it sends and the pieces it receives side by side in its
// slot, so that its host call is an ordinary one of m elements per block.
Status Communicator::enqueue_staged(const CollArgs& dev, void* stream) {
  const bool elementwise = dev.coll == sched::Coll::AllReduce || dev.coll == sched::Coll::Broadcast ||
                           dev.coll == sched::Coll::Reduce;
  const bool blockwise = dev.coll == sched::Coll::AllGather || dev.coll == sched::Coll::ReduceScatter ||
                         dev.coll == sched::Coll::AllToAll;
  const size_t esize = reduce::dtype_size(dev.dtype);
  const auto chunk_bytes = static_cast<size_t>(std::max<int64_t>(1, params::DEVICE_CHUNK_BYTES()));
  const size_t n = static_cast<size_t>(nranks_);
  const size_t per = std::max<size_t>(1, chunk_bytes / esize);
  // A pre-multiplied sum's scalar in device memory goes into every slot beside
  // the data, copied in stream order: the call uses its value as of then.
  const void* scalar = device_scalar(dev.op);
  if (elementwise && dev.count > per) {
    const bool uses_send = this->uses_send(dev), uses_recv = this->uses_recv(dev);
    auto range = [&](const void* p, size_t i) { return static_cast<const unsigned char*>(p) + i * per * esize; };
    auto bytes = [&](size_t i) { return std::min(per, dev.count - i * per) * esize; };
    return enqueue_chunked(
        sched::coll_name(dev.coll), stream, (dev.count + per - 1) / per,
        [&](size_t i) {
          StagingLayout l;
          if (uses_send) l.add(range(dev.send, i), bytes(i), true, false);
          if (uses_recv) l.add(range(dev.recv, i), bytes(i), false, true);
          if (scalar != nullptr) l.add(scalar, esize, true, false);
          return l;
        },
        [&](size_t i, const StagingLayout& l, unsigned char* base) {
          CollArgs host = dev;
          host.count = bytes(i) / esize;
          host.send = uses_send ? l.host(base, range(dev.send, i)) : nullptr;
          host.recv = uses_recv ? l.host(base, range(dev.recv, i)) : nullptr;
          if (scalar != nullptr) host.scalar = l.host(base, scalar);
          return std::make_unique<CollOp>(this, host, nullptr);
        });
  }
  const size_t m = std::max<size_t>(1, chunk_bytes / esize / n);
  if (blockwise && dev.count > m) {
    // Blocks on each side: all-gather sends one and receives n, reduce-scatter
    // the reverse, all-to-all n each way; received pieces start after the sent.
    const size_t blocks_in = dev.coll == sched::Coll::AllGather ? 1 : n;
    const size_t blocks_out = dev.coll == sched::Coll::ReduceScatter ? 1 : n;
    const size_t recv_at = (blocks_in * m * esize + 255) / 256 * 256;
    const size_t scalar_at = recv_at + (blocks_out * m * esize + 255) / 256 * 256;
    auto piece = [&](size_t i) { return std::min(m, dev.count - i * m) * esize; };
    auto at = [&](const void* p, size_t block, size_t i) {
      return static_cast<const unsigned char*>(p) + (block * dev.count + i * m) * esize;
    };
    return enqueue_chunked(
        sched::coll_name(dev.coll), stream, (dev.count + m - 1) / m,
        [&](size_t i) {
          StagingLayout l;
          for (size_t b = 0; b < blocks_in; ++b) l.put(at(dev.send, b, i), piece(i), true, false, b * piece(i));
          for (size_t b = 0; b < blocks_out; ++b)
            l.put(at(dev.recv, b, i), piece(i), false, true, recv_at + b * piece(i));
          if (scalar != nullptr) l.put(scalar, esize, true, false, scalar_at);
          return l;
        },
        [&](size_t i, const StagingLayout&, unsigned char* base) {
          CollArgs host = dev;
          host.count = piece(i) / esize;
          host.send = base;
          host.recv = base + recv_at;
          if (scalar != nullptr) host.scalar = base + scalar_at;
          return std::make_unique<CollOp>(this, host, nullptr);
        });
  }
  // The bytes the call reads and writes on this rank. Buffers in the in-place
  // position merge into one segment, so the host call is in place too.
  const sched::BuildArgs b{dev.coll, nranks_, dev.count, dev.root, 0};
  const bool uses_send = dev.count > 0 && this->uses_send(dev), uses_recv = dev.count > 0 && this->uses_recv(dev);
  StagingLayout layout;
  if (uses_send) layout.add(dev.send, sched::send_count(b) * esize, true, false);
  if (uses_recv) layout.add(dev.recv, sched::recv_count(b) * esize, false, true);
  if (scalar != nullptr && uses_send) layout.add(scalar, esize, true, false);
  return stage_on_stream(sched::coll_name(dev.coll), stream, layout, [&](unsigned char* base) {
    CollArgs host = dev;
    host.send = uses_send ? layout.host(base, dev.send) : nullptr;
    host.recv = uses_recv ? layout.host(base, dev.recv) : nullptr;
    if (scalar != nullptr && uses_send) host.scalar = layout.host(base, scalar);
    return std::make_unique<CollOp>(this, host, nullptr);
  });
}

transport::cuda_p2p::Pairs& Communicator::device_pairs(const exec::cuda::Api& d) {
  std::lock_guard<std::mutex> lock(pairs_mu_);
  if (pairs_ == nullptr) {
    transport::cuda_p2p::Pairs::Options o;
    o.rank = rank_;
    o.nranks = nranks_;
    o.same_host = same_host_;
    o.buffer_bytes = static_cast<size_t>(std::max<int64_t>(0, params::P2P_BUFFER_BYTES()));
    o.same_gpu_only = params::P2P_LEVEL() == "LOC";
    // Without peer access, areas in host memory, as the collectives' buffers.
    o.host_area = params::P2P_DISABLE() != 0 && params::SHM_DISABLE() == 0;
    if (params::P2P_DISABLE() != 0 && !o.host_area) o.disabled_by = "WEFT_P2P_DISABLE=1 WEFT_SHM_DISABLE=1";
    o.timeout_ms = timeout_ms_;
    o.on_timeout = [this](const Status& st) { fail(st); };
    pairs_ = std::make_unique<transport::cuda_p2p::Pairs>(d, std::move(o));
  }
  return *pairs_;
}

Status Communicator::enqueue_p2p(const std::vector<exec::P2P>& ops, const std::vector<exec::LocalCopy>& copies,
                                 void* stream) {
  WEFT_TRY(async_error());
  const exec::cuda::Api* d = nullptr;
  WEFT_TRY(stream_driver("point-to-point", stream, &d));
  WEFT_TRY(refuse_capture(*d, "point-to-point", stream));
  transport::cuda_p2p::Pairs& pairs = device_pairs(*d);
  // Every peer's route, in ascending order: a pair connects at its first call,
  // with the peer's, and the order keeps three ranks from waiting in a circle.
  std::vector<int> peers;
  for (const exec::P2P& op : ops) peers.push_back(op.peer);
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  std::vector<bool> direct(static_cast<size_t>(nranks_), false);
  for (int q : peers) {
    // The two ranks of the pair swap through a bootstrap group of their own.
    std::unique_ptr<boot::Bootstrap> pair;
    auto swap = [&](const void* mine, void* theirs, size_t bytes) -> Status {
      const int lo = std::min(rank_, q), hi = std::max(rank_, q);
      if (pair == nullptr)
        WEFT_TRY(boot_->subgroup(kPairTag | static_cast<uint64_t>(lo) << 24 | static_cast<uint64_t>(hi), {lo, hi}, &pair));
      std::vector<unsigned char> both(2 * bytes);
      WEFT_TRY(pair->allgather(mine, bytes, both.data(), Deadline::after_ms(timeout_ms_)));
      std::memcpy(theirs, both.data() + (rank_ == lo ? bytes : 0), bytes);
      return Status::Ok();
    };
    bool p2p = false;
    Status st = pairs.route(q, swap, &p2p);
    if (!st.ok()) return st.prefix("point-to-point on device memory: connecting with rank " + std::to_string(q) + ": ");
    direct[static_cast<size_t>(q)] = p2p;
  }
  std::vector<exec::P2P> staged;
  std::vector<transport::cuda_p2p::Pairs::Op> mapped;
  for (const exec::P2P& op : ops) {
    if (direct[static_cast<size_t>(op.peer)]) mapped.push_back({op.send, op.peer, op.buf, op.bytes});
    else staged.push_back(op);
  }
  if (mapped.empty()) return enqueue_staged_p2p(ops, copies, stream);
  // The staged part first: it waits only for the peers' staged parts, which
  // come first in their calls too.
  if (!staged.empty()) WEFT_TRY(enqueue_staged_p2p(staged, {}, stream));
  std::vector<transport::cuda_p2p::Pairs::Copy> local;
  for (const exec::LocalCopy& c : copies) local.push_back({c.dst, c.src, c.bytes});
  Status st = pairs.call(mapped, local, stream);
  if (!st.ok()) fail(st);  // the stream is out of step with the peers' now
  return st;
}

// Messages and local copies longer than WEFT_DEVICE_CHUNK_BYTES go in chunks:
// chunk i carries bytes [i x chunk, (i + 1) x chunk) of each one that long, side
// by side in the slot, as a point-to-point call of its own. The peer cuts its
// matching message at the same places (the setting is shared), so chunk i's
// pieces meet in the peers' chunk i calls, in the group's order. A receive from
// any rank is staged whole: its pieces could be taken from different senders.
Status Communicator::enqueue_staged_p2p(const std::vector<exec::P2P>& ops, const std::vector<exec::LocalCopy>& copies,
                                        void* stream) {
  const auto chunk = static_cast<size_t>(std::max<int64_t>(1, params::DEVICE_CHUNK_BYTES()));
  size_t largest = 0;
  bool any_source = false;
  for (const exec::P2P& op : ops) {
    largest = std::max(largest, op.bytes);
    any_source = any_source || op.peer == exec::kAnySource;
  }
  for (const exec::LocalCopy& c : copies) largest = std::max(largest, c.bytes);
  if (largest > chunk && !any_source) {
    auto piece = [&](size_t bytes, size_t i) { return i * chunk < bytes ? std::min(chunk, bytes - i * chunk) : 0; };
    auto at = [&](const void* p, size_t i) { return static_cast<const unsigned char*>(p) + i * chunk; };
    // Where chunk i's pieces lie in the slot: the messages' in order, then each
    // copy's source and destination (a send and a receive may share device memory,
    // so pieces are found by place, not by address).
    auto offsets = [&](size_t i) {
      std::vector<size_t> off;
      size_t end = 0;
      auto next = [&](size_t bytes) {
        off.push_back(end);
        end += (bytes + 255) / 256 * 256;
      };
      for (const exec::P2P& op : ops) next(piece(op.bytes, i));
      for (const exec::LocalCopy& c : copies) {
        next(piece(c.bytes, i));
        next(piece(c.bytes, i));
      }
      return off;
    };
    return enqueue_chunked(
        "point-to-point", stream, (largest + chunk - 1) / chunk,
        [&](size_t i) {
          const std::vector<size_t> off = offsets(i);
          StagingLayout l;
          size_t k = 0;
          for (const exec::P2P& op : ops) l.put(at(op.buf, i), piece(op.bytes, i), op.send, !op.send, off[k++]);
          for (const exec::LocalCopy& c : copies) {
            l.put(at(c.src, i), piece(c.bytes, i), true, false, off[k++]);
            l.put(at(c.dst, i), piece(c.bytes, i), false, true, off[k++]);
          }
          return l;
        },
        [&](size_t i, const StagingLayout&, unsigned char* base) {
          const std::vector<size_t> off = offsets(i);
          std::vector<exec::P2P> host_ops;
          std::vector<exec::LocalCopy> host_copies;
          size_t k = 0;
          for (const exec::P2P& op : ops) {
            const size_t bytes = piece(op.bytes, i);
            if (bytes > 0) host_ops.push_back({op.send, op.peer, base + off[k], bytes, op.from});
            ++k;
          }
          for (const exec::LocalCopy& c : copies) {
            const size_t bytes = piece(c.bytes, i);
            if (bytes > 0) host_copies.push_back({base + off[k + 1], base + off[k], bytes});
            k += 2;
          }
          return std::make_unique<P2POp>(this, std::move(host_ops), std::move(host_copies), nullptr);
        });
  }
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
