// The C API's collectives, point-to-point calls and groups. Every entry point
// builds a CollArgs (or a point-to-point batch: a send, a receive, a gather, ...)
// and hands it to one of two dispatchers, which runs it now, posts it (the
// *Async forms), or records it inside a group.
#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "comm/api_internal.h"
#include "comm/batches.h"
#include "exec/buffer_kind.h"
#include "exec/cuda_driver.h"

namespace {
using weft::api::Use;
using weft::api::report;
using weft::sched::Coll;

// Calls recorded between weftGroupStart and the outermost weftGroupEnd.
struct Recorded {
  weftComm* comm;
  bool p2p;
  weft::CollArgs coll;
  weft::P2PBatch batch;
  void* stream = nullptr;  // device memory: the stream it goes on
};
thread_local int t_group_depth = 0;
thread_local std::vector<Recorded> t_group;
// Groups open on any thread: while none is, a call skips the thread-local
// lookup (a function call in a shared library).
std::atomic<int> g_open_groups{0};

// The outermost group is ending (t_group_depth just reached 0): its recorded
// calls, and the communicators they use in order of first appearance.
std::vector<Recorded> close_group(std::vector<weftComm*>* comms) {
  g_open_groups.fetch_sub(1, std::memory_order_relaxed);
  std::vector<Recorded> group = std::move(t_group);
  t_group.clear();
  for (const Recorded& r : group)
    if (std::find(comms->begin(), comms->end(), r.comm) == comms->end()) comms->push_back(r.comm);
  return group;
}

bool in_group() { return g_open_groups.load(std::memory_order_relaxed) > 0 && t_group_depth > 0; }

weftResult_t with_rank(weft::Communicator* c, weft::Status st) {
  if (!st.ok()) st.prefix("rank " + std::to_string(c->rank()) + ": ");
  return report(st);
}

// The stream a blocking call goes on: NCCL's stream 0 (NULL) with device
// buffers is the legacy default stream; probe is a buffer the call surely uses.
weftStream_t stream_of(weftStream_t stream, weftRequest_t* request, const void* probe) {
  if (stream == nullptr && request == nullptr && probe != nullptr && weft::exec::cuda::loaded() &&
      weft::exec::buffer_kind(probe).device)
    return weft::exec::cuda::kLegacyStream;
  return stream;
}

weftResult_t dispatch(weftComm_t comm, const char* fn, const weft::CollArgs& a,
                      weftStream_t stream, weftRequest_t* request) {
  weftResult_t rc;
  Use c(comm, fn, &rc);
  if (!c) return rc;
  stream = stream_of(stream, request, a.recv != nullptr ? a.recv : a.send);
  if (stream != nullptr) {
    if (in_group()) {
      weft::Status st = c->validate(a, true);
      if (st.ok()) t_group.push_back({comm, false, a, {}, stream});
      return with_rank(c.get(), st);
    }
    return with_rank(c.get(), c->enqueue(a, stream));
  }
  if (request != nullptr) return with_rank(c.get(), c->post(a, request));
  if (in_group()) {
    weft::Status st = c->validate(a);
    if (st.ok()) t_group.push_back({comm, false, a, {}});
    return with_rank(c.get(), st);
  }
  weft::Status st = c->run(a);
  return st.ok() ? weftSuccess : with_rank(c.get(), std::move(st));
}

// A point-to-point batch that build(communicator, &batch) checks and makes.
// request: the non-blocking form. probe: a buffer the call surely uses (stream_of).
template <class Build>
weftResult_t batch(weftComm_t comm, const char* fn, weftStream_t stream, weftRequest_t* request, const void* probe,
                   Build build) {
  weftResult_t rc;
  Use c(comm, fn, &rc);
  if (!c) return rc;
  stream = stream_of(stream, request, probe);
  weft::P2PBatch b;
  b.on_stream = stream != nullptr;
  weft::Status st = build(*c.get(), &b);
  if (!st.ok()) return with_rank(c.get(), st);
  if (stream != nullptr) {
    if (in_group()) {
      t_group.push_back({comm, true, {}, std::move(b), stream});
      return weftSuccess;
    }
    return with_rank(c.get(), c->enqueue_p2p(b.ops, b.copies, stream));
  }
  if (request != nullptr) return with_rank(c.get(), c->post_p2p(std::move(b.ops), std::move(b.copies), request));
  if (in_group()) {
    t_group.push_back({comm, true, {}, std::move(b)});
    return weftSuccess;
  }
  return with_rank(c.get(), c->run_p2p(b.ops, b.copies));
}

// request: the non-blocking form (weftSendAsync / weftRecvAsync).
weftResult_t point_to_point(bool send, void* buf, size_t count, weftDataType_t dtype, int peer,
                            weftComm_t comm, weftStream_t stream, weftRequest_t* request) {
  const char* fn = request != nullptr ? (send ? "weftSendAsync" : "weftRecvAsync") : send ? "weftSend" : "weftRecv";
  return batch(comm, fn, stream, request, buf, [&](weft::Communicator& c, weft::P2PBatch* b) {
    if (peer == weft::exec::kAnySource && !send)
      return weft::Error(weftInvalidArgument, "%s: peer %d is out of range [0, %d) (from any rank: weftRecvAnyAsync)",
                         fn, peer, c.nranks());
    WEFT_TRY(c.validate_p2p(send, buf, count, dtype, peer, b->on_stream));
    // Only a group holds both halves of an exchange with itself (weftGroupEnd pairs them).
    if (peer == c.rank() && (request != nullptr || !in_group()))
      return weft::Error(weftInvalidUsage, "%s: peer %d is this rank itself: a send to itself and its receive "
                         "go together in one weftGroupStart/End", fn, peer);
    b->ops.push_back({send, peer, buf, count * weft::reduce::dtype_size(dtype)});
    return weft::Status::Ok();
  });
}

weftResult_t gather_or_scatter(bool gather, const void* sendbuff, void* recvbuff, size_t count,
                               weftDataType_t dtype, int root, weftComm_t comm, weftStream_t stream,
                               weftRequest_t* request) {
  const char* fn = request != nullptr ? (gather ? "weftGatherAsync" : "weftScatterAsync")
                   : gather           ? "weftGather"
                                      : "weftScatter";
  return batch(comm, fn, stream, request, gather ? sendbuff : recvbuff, [&](weft::Communicator& c, weft::P2PBatch* b) {
    return weft::gather_batch(fn, gather, sendbuff, recvbuff, count, dtype, root, c.rank(), c.nranks(), b);
  });
}

weftResult_t alltoallv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                       const size_t* recvcounts, const size_t* rdispls, weftDataType_t dtype, weftComm_t comm,
                       weftStream_t stream, weftRequest_t* request) {
  const char* fn = request != nullptr ? "weftAlltoAllvAsync" : "weftAlltoAllv";
  return batch(comm, fn, stream, request, sendbuff != nullptr ? sendbuff : recvbuff,
               [&](weft::Communicator& c, weft::P2PBatch* b) {
    return weft::alltoallv_batch(fn, sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, dtype, c.rank(),
                                 c.nranks(), b);
  });
}

}  // namespace

extern "C" {

weftResult_t weftAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                           weftStream_t stream) {
  return dispatch(comm, "weftAllReduce", {Coll::AllReduce, sendbuff, recvbuff, count, datatype, op, 0},
                  stream, nullptr);
}

weftResult_t weftBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           weftDataType_t datatype, int root, weftComm_t comm, weftStream_t stream) {
  return dispatch(comm, "weftBroadcast",
                  {Coll::Broadcast, sendbuff, recvbuff, count, datatype, weftSum, root}, stream, nullptr);
}

weftResult_t weftReduce(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                        weftRedOp_t op, int root, weftComm_t comm, weftStream_t stream) {
  return dispatch(comm, "weftReduce", {Coll::Reduce, sendbuff, recvbuff, count, datatype, op, root},
                  stream, nullptr);
}

weftResult_t weftAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           weftDataType_t datatype, weftComm_t comm, weftStream_t stream) {
  return dispatch(comm, "weftAllGather",
                  {Coll::AllGather, sendbuff, recvbuff, sendcount, datatype, weftSum, 0}, stream, nullptr);
}

weftResult_t weftReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                               weftStream_t stream) {
  return dispatch(comm, "weftReduceScatter",
                  {Coll::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0}, stream, nullptr);
}

weftResult_t weftAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          weftDataType_t datatype, weftComm_t comm, weftStream_t stream) {
  return dispatch(comm, "weftAlltoAll", {Coll::AllToAll, sendbuff, recvbuff, count, datatype, weftSum, 0},
                  stream, nullptr);
}

weftResult_t weftAllReduceAsync(const void* sendbuff, void* recvbuff, size_t count,
                                weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                                weftRequest_t* request) {
  if (request == nullptr) return report(weft::Error(weftInvalidArgument, "weftAllReduceAsync: request is NULL"));
  return dispatch(comm, "weftAllReduceAsync",
                  {Coll::AllReduce, sendbuff, recvbuff, count, datatype, op, 0}, nullptr, request);
}

weftResult_t weftBroadcastAsync(const void* sendbuff, void* recvbuff, size_t count,
                                weftDataType_t datatype, int root, weftComm_t comm,
                                weftRequest_t* request) {
  if (request == nullptr) return report(weft::Error(weftInvalidArgument, "weftBroadcastAsync: request is NULL"));
  return dispatch(comm, "weftBroadcastAsync",
                  {Coll::Broadcast, sendbuff, recvbuff, count, datatype, weftSum, root}, nullptr, request);
}

weftResult_t weftReduceAsync(const void* sendbuff, void* recvbuff, size_t count,
                             weftDataType_t datatype, weftRedOp_t op, int root, weftComm_t comm,
                             weftRequest_t* request) {
  if (request == nullptr) return report(weft::Error(weftInvalidArgument, "weftReduceAsync: request is NULL"));
  return dispatch(comm, "weftReduceAsync", {Coll::Reduce, sendbuff, recvbuff, count, datatype, op, root},
                  nullptr, request);
}

weftResult_t weftAllGatherAsync(const void* sendbuff, void* recvbuff, size_t sendcount,
                                weftDataType_t datatype, weftComm_t comm, weftRequest_t* request) {
  if (request == nullptr) return report(weft::Error(weftInvalidArgument, "weftAllGatherAsync: request is NULL"));
  return dispatch(comm, "weftAllGatherAsync",
                  {Coll::AllGather, sendbuff, recvbuff, sendcount, datatype, weftSum, 0}, nullptr, request);
}

weftResult_t weftReduceScatterAsync(const void* sendbuff, void* recvbuff, size_t recvcount,
                                    weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                                    weftRequest_t* request) {
  if (request == nullptr) return report(weft::Error(weftInvalidArgument, "weftReduceScatterAsync: request is NULL"));
  return dispatch(comm, "weftReduceScatterAsync",
                  {Coll::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0}, nullptr, request);
}

weftResult_t weftAlltoAllAsync(const void* sendbuff, void* recvbuff, size_t count,
                               weftDataType_t datatype, weftComm_t comm, weftRequest_t* request) {
  if (request == nullptr) return report(weft::Error(weftInvalidArgument, "weftAlltoAllAsync: request is NULL"));
  return dispatch(comm, "weftAlltoAllAsync",
                  {Coll::AllToAll, sendbuff, recvbuff, count, datatype, weftSum, 0}, nullptr, request);
}

weftResult_t weftSend(const void* sendbuff, size_t count, weftDataType_t datatype, int peer,
                      weftComm_t comm, weftStream_t stream) {
  return point_to_point(true, const_cast<void*>(sendbuff), count, datatype, peer, comm, stream, nullptr);
}

weftResult_t weftRecv(void* recvbuff, size_t count, weftDataType_t datatype, int peer,
                      weftComm_t comm, weftStream_t stream) {
  return point_to_point(false, recvbuff, count, datatype, peer, comm, stream, nullptr);
}

weftResult_t weftSendAsync(const void* sendbuff, size_t count, weftDataType_t datatype, int peer, weftComm_t comm,
                           weftRequest_t* request) {
  if (request == nullptr) return report(weft::Error(weftInvalidArgument, "weftSendAsync: request is NULL"));
  return point_to_point(true, const_cast<void*>(sendbuff), count, datatype, peer, comm, nullptr, request);
}

weftResult_t weftRecvAsync(void* recvbuff, size_t count, weftDataType_t datatype, int peer, weftComm_t comm,
                           weftRequest_t* request) {
  if (request == nullptr) return report(weft::Error(weftInvalidArgument, "weftRecvAsync: request is NULL"));
  return point_to_point(false, recvbuff, count, datatype, peer, comm, nullptr, request);
}

weftResult_t weftRecvAnyAsync(void* recvbuff, size_t count, weftDataType_t datatype, int* source, weftComm_t comm,
                              weftRequest_t* request) {
  const char* fn = "weftRecvAnyAsync";
  if (request == nullptr) return report(weft::Error(weftInvalidArgument, "%s: request is NULL", fn));
  if (source == nullptr) return report(weft::Error(weftInvalidArgument, "%s: source is NULL", fn));
  return batch(comm, fn, nullptr, request, recvbuff, [&](weft::Communicator& c, weft::P2PBatch* b) {
    WEFT_TRY(c.validate_p2p(false, recvbuff, count, datatype, weft::exec::kAnySource, false));
    if (c.nranks() == 1)
      return weft::Error(weftInvalidUsage, "%s: no other rank could send (the communicator has one rank)", fn);
    *source = weft::exec::kAnySource;
    b->ops.push_back({false, weft::exec::kAnySource, recvbuff, count * weft::reduce::dtype_size(datatype), source});
    return weft::Status::Ok();
  });
}

weftResult_t weftGather(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, int root,
                        weftComm_t comm, weftStream_t stream) {
  return gather_or_scatter(true, sendbuff, recvbuff, count, datatype, root, comm, stream, nullptr);
}

weftResult_t weftScatter(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, int root,
                         weftComm_t comm, weftStream_t stream) {
  return gather_or_scatter(false, sendbuff, recvbuff, count, datatype, root, comm, stream, nullptr);
}

weftResult_t weftGatherAsync(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, int root,
                             weftComm_t comm, weftRequest_t* request) {
  if (request == nullptr) return report(weft::Error(weftInvalidArgument, "weftGatherAsync: request is NULL"));
  return gather_or_scatter(true, sendbuff, recvbuff, count, datatype, root, comm, nullptr, request);
}

weftResult_t weftScatterAsync(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, int root,
                              weftComm_t comm, weftRequest_t* request) {
  if (request == nullptr) return report(weft::Error(weftInvalidArgument, "weftScatterAsync: request is NULL"));
  return gather_or_scatter(false, sendbuff, recvbuff, count, datatype, root, comm, nullptr, request);
}

weftResult_t weftAlltoAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                           const size_t* recvcounts, const size_t* rdispls, weftDataType_t datatype, weftComm_t comm,
                           weftStream_t stream) {
  return alltoallv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, comm, stream, nullptr);
}

weftResult_t weftAlltoAllvAsync(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                                void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                                weftDataType_t datatype, weftComm_t comm, weftRequest_t* request) {
  if (request == nullptr) return report(weft::Error(weftInvalidArgument, "weftAlltoAllvAsync: request is NULL"));
  return alltoallv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, comm, nullptr, request);
}

weftResult_t weftBarrier(weftComm_t comm) {
  // A one-byte all-reduce: every rank's contribution must arrive before any
  // rank's result exists.
  uint8_t token = 0;
  return dispatch(comm, "weftBarrier", {Coll::AllReduce, &token, &token, 1, weftUint8, weftMax, 0},
                  nullptr, nullptr);
}

weftResult_t weftGroupStart(void) {
  if (t_group_depth++ == 0) g_open_groups.fetch_add(1, std::memory_order_relaxed);
  return weftSuccess;
}

weftResult_t weftGroupEnd(void) {
  if (t_group_depth == 0)
    return report(weft::Error(weftInvalidUsage, "weftGroupEnd without weftGroupStart"));
  if (--t_group_depth > 0) return weftSuccess;
  // Per communicator, in order of first appearance: its point-to-point
  // operations together, then its collectives in the order they were called.
  std::vector<weftComm*> comms;
  const std::vector<Recorded> group = close_group(&comms);
  weftResult_t first = weftSuccess;
  for (weftComm* comm : comms) {
    weftResult_t rc = weftSuccess;  // Use sets it only when the lookup fails
    Use c(comm, "weftGroupEnd", &rc);
    if (!c) {
      if (first == weftSuccess) first = rc;
      continue;
    }
    std::vector<weft::exec::P2P> ops;
    std::vector<weft::exec::LocalCopy> copies;
    // Point-to-point on device memory goes on one stream, and not beside host
    // memory (the two would be ordered differently on the peers).
    void* stream = nullptr;
    weft::Status paired;
    bool host = false;
    for (const Recorded& r : group) {
      if (r.comm != comm || !r.p2p) continue;
      if (r.stream == nullptr) host = true;
      else if (stream == nullptr) stream = r.stream;
      if ((stream != nullptr && host) || (r.stream != nullptr && r.stream != stream))
        paired = weft::Error(weftInvalidUsage, "weftGroupEnd: the group's point-to-point calls mix %s",
                             host ? "host and device memory" : "streams (one stream per communicator)");
      ops.insert(ops.end(), r.batch.ops.begin(), r.batch.ops.end());
      copies.insert(copies.end(), r.batch.copies.begin(), r.batch.copies.end());
    }
    if (paired.ok()) paired = weft::pair_self("weftGroupEnd", c->rank(), &ops, &copies);
    if (!paired.ok()) rc = with_rank(c.get(), paired);
    else if (stream != nullptr) rc = with_rank(c.get(), c->enqueue_p2p(ops, copies, stream));
    else if (!ops.empty() || !copies.empty()) rc = with_rank(c.get(), c->run_p2p(ops, copies));
    for (const Recorded& r : group)
      if (rc == weftSuccess && r.comm == comm && !r.p2p)
        rc = with_rank(c.get(), r.stream != nullptr ? c->enqueue(r.coll, r.stream) : c->run(r.coll));
    if (first == weftSuccess) first = rc;
  }
  return first;
}

weftResult_t weftGroupSimulateEnd(double* seconds) {
  if (seconds == nullptr) return report(weft::Error(weftInvalidArgument, "weftGroupSimulateEnd: seconds is NULL"));
  if (t_group_depth == 0)
    return report(weft::Error(weftInvalidUsage, "weftGroupSimulateEnd without weftGroupStart"));
  if (t_group_depth > 1)
    return report(weft::Error(weftInvalidUsage,
                              "weftGroupSimulateEnd: %d groups are open; it ends the outermost only (close the "
                              "inner ones with weftGroupEnd)",
                              t_group_depth));
  t_group_depth = 0;
  std::vector<weftComm*> comms;
  const std::vector<Recorded> group = close_group(&comms);
  double total = 0;
  for (weftComm* comm : comms) {
    weftResult_t rc = weftSuccess;
    Use c(comm, "weftGroupSimulateEnd", &rc);
    if (!c) return rc;
    std::vector<weft::exec::P2P> ops;
    bool device = false;
    for (const Recorded& r : group) {
      if (r.comm != comm || !r.p2p) continue;
      ops.insert(ops.end(), r.batch.ops.begin(), r.batch.ops.end());
      device = device || r.stream != nullptr;
    }
    double t = 0;
    weft::Status st = c->estimate_p2p(ops, device, &t);
    total += t;
    for (const Recorded& r : group) {
      if (!st.ok() || r.comm != comm || r.p2p) continue;
      st = r.stream != nullptr ? c->estimate_device(r.coll, &t) : c->estimate(r.coll, &t);
      total += t;
    }
    if (!st.ok()) return with_rank(c.get(), st);
  }
  *seconds = total;
  return weftSuccess;
}

weftResult_t weftRedOpCreatePreMulSum(weftRedOp_t* op, void* scalar, weftDataType_t datatype,
                                      weftScalarResidence_t residence, weftComm_t comm) {
  weftResult_t rc;
  Use c(comm, "weftRedOpCreatePreMulSum", &rc);
  if (!c) return rc;
  if (residence != weftScalarHostImmediate && residence != weftScalarDevice)
    return report(weft::Error(weftInvalidArgument, "weftRedOpCreatePreMulSum: invalid residence %d",
                              static_cast<int>(residence)));
  return report(c->create_premul(scalar, datatype, residence, op));
}

weftResult_t weftRedOpDestroy(weftRedOp_t op, weftComm_t comm) {
  weftResult_t rc;
  Use c(comm, "weftRedOpDestroy", &rc);
  if (!c) return rc;
  return report(c->destroy_premul(op));
}

}  // extern "C"
