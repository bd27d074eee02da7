#include "bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "datatype.h"

namespace weftperf {
namespace {

using Clock = std::chrono::steady_clock;

Measurement Measure(const Job& job, const Collective& coll, const PerfOptions& opt,
                    const Buffers& b, const RowSpec& row, bool in_place, size_t row_bytes) {
  auto run = [&] {
    weftResult_t rc = coll.Run(b, in_place, row, job.comm);
    if (rc != weftSuccess) DieOnApiError(job, coll.Describe(row, in_place), rc);
  };
  // --device: inputs are filled and checked in the host twins.
  const Buffers host = b.Host();
  auto copy = [&](void* dst, const void* src, size_t bytes) {
    if (!job.device->copy(dst, src, bytes)) DieOnApiError(job, "cuMemcpyAsync", weftUnhandledCudaError);
  };
  auto fill = [&] {
    coll.FillInputs(host, in_place, row, job.rank, job.nranks);
    if (job.device == nullptr) return;
    copy(b.send, host.send, b.send_bytes);
    copy(b.recv, host.recv, b.recv_bytes);
  };
  auto finish = [&] {
    if (job.device != nullptr && !job.device->synchronize())
      DieOnApiError(job, "synchronizing the stream", weftUnhandledCudaError);
  };
  // Timed on the check pattern too, so -c 1 and -c 0 time the same kind of data.
  if (opt.check) fill();
  for (int i = 0; i < opt.warmup; ++i) run();
  // On a stream each warm-up call finishes before the next is enqueued: the
  // calls are timed trials, and a queue thousands deep would outlast their deadline.
  WarmUntilTuned(coll, row, job.comm, [&] {
    run();
    finish();
  });
  finish();
  void* graph = nullptr;
  if (opt.graph) {
    // Captured after the warm-up (a communicator's first device call cannot be);
    // the first launch uploads the graph, untimed.
    if (!job.device->begin_capture()) DieOnApiError(job, "cuStreamBeginCapture", weftUnhandledCudaError);
    for (int i = 0; i < opt.iters; ++i) run();
    graph = job.device->end_capture();
    if (graph == nullptr || !job.device->launch(graph)) DieOnApiError(job, "capturing the calls", weftUnhandledCudaError);
    finish();
  }
  // Start together, so one rank's late arrival is not charged to the collective.
  Barrier(job);
  Clock::time_point t0 = Clock::now();
  if (graph != nullptr) {
    if (!job.device->launch(graph)) DieOnApiError(job, "cuGraphLaunch", weftUnhandledCudaError);
  } else {
    for (int i = 0; i < opt.iters; ++i) run();
  }
  finish();
  double local_us =
      std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / opt.iters;
  if (graph != nullptr) job.device->destroy_graph(graph);

  Measurement m;
  m.time_us = MaxOverRanks(job, local_us);
  m.algbw = m.time_us > 0 ? static_cast<double>(row_bytes) / (m.time_us * 1e3) : 0;  // GB/s
  m.busbw = m.algbw * coll.BusFactor(job.nranks);
  if (opt.check) {
    // A fresh, untimed call: in-place iterations above have overwritten the inputs.
    fill();
    run();
    if (job.device != nullptr) {
      copy(host.send, b.send, b.send_bytes);
      copy(host.recv, b.recv, b.recv_bytes);
    }
    finish();
    m.wrong = SumOverRanks(job, coll.CountWrong(host, in_place, row, job.rank, job.nranks));
  }
  return m;
}

}  // namespace

bool Tuned(const Collective& coll, const RowSpec& row, weftComm_t comm) {
  const char* algo = nullptr;
  int settled = 1;
  // sendrecv has no algorithm to query: an error here means "nothing to tune".
  return weftCommGetAlgorithm(comm, coll.Name(), row.count, row.type, std::max(row.root, 0), &algo, &settled) !=
             weftSuccess ||
         settled != 0;
}

void WarmUntilTuned(const Collective& coll, const RowSpec& row, weftComm_t comm, const std::function<void()>& run) {
  // Every rank sees the same calls, so every rank settles at the same call and
  // leaves this loop together; the cap only guards against a library bug.
  constexpr int kMaxCalls = 100000;
  for (int i = 0; i < kMaxCalls && !Tuned(coll, row, comm); ++i) run();
}

void Barrier(const Job& job) {
  int32_t token = 0;
  weftResult_t rc = weftAllReduce(&token, &token, 1, weftInt32, weftSum, job.comm, nullptr);
  if (rc != weftSuccess) DieOnApiError(job, "weftAllReduce (barrier)", rc);
}

double MaxOverRanks(const Job& job, double v) {
  weftResult_t rc = weftAllReduce(&v, &v, 1, weftFloat64, weftMax, job.comm, nullptr);
  if (rc != weftSuccess) DieOnApiError(job, "weftAllReduce (time max)", rc);
  return v;
}

int64_t SumOverRanks(const Job& job, int64_t v) {
  weftResult_t rc = weftAllReduce(&v, &v, 1, weftInt64, weftSum, job.comm, nullptr);
  if (rc != weftSuccess) DieOnApiError(job, "weftAllReduce (#wrong sum)", rc);
  return v;
}

void DieOnApiError(const Job& job, const std::string& call, weftResult_t rc) {
  std::fprintf(stderr, "weft-perf: rank %d: %s failed: %s: %s\n", job.rank, call.c_str(),
               weftGetErrorString(rc), weftGetLastError(job.comm));
  std::fflush(stderr);
  if (job.comm != nullptr) weftCommAbort(job.comm);
  std::exit(1);
}

SweepResult RunSweep(const Job& job, const Collective& coll, const PerfOptions& opt,
                     const Buffers& buffers) {
  SweepResult result;
  double busbw_sum = 0;
  int busbw_n = 0;
  const std::vector<size_t> sizes = SizeSweep(opt);
  // A collective without an op runs once per type, not once per op.
  const std::vector<weftRedOp_t> ops = coll.HasOp() ? opt.ops : std::vector<weftRedOp_t>{weftSum};
  for (weftDataType_t type : opt.types) {
    const TypeInfo& info = Info(type);
    for (weftRedOp_t op : ops) {
      for (size_t bytes : sizes) {
        RowSpec spec;
        spec.type = type;
        spec.op = op;
        if (coll.HasRoot()) spec.root = opt.root;
        spec.count = coll.CountForBytes(bytes, info.size, job.nranks);
        if (spec.count == 0) continue;  // smaller than one element
        Row row;
        row.bytes = coll.RowBytes(spec.count, info.size, job.nranks);
        row.count = spec.count;
        row.type = info.name;
        row.redop = coll.HasOp() ? OpName(op) : "none";
        row.root = spec.root;
        row.out_of_place = Measure(job, coll, opt, buffers, spec, false, row.bytes);
        if (coll.HasInPlace())
          row.in_place = Measure(job, coll, opt, buffers, spec, true, row.bytes);
        else
          row.in_place.skipped = true;
        for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
          if (m->skipped) continue;  // not in the average either
          busbw_sum += m->busbw;
          ++busbw_n;
          if (m->wrong > 0) result.wrong_total += m->wrong;
        }
        if (job.rank == 0) PrintRow(stdout, row);
        result.rows.push_back(std::move(row));
      }
    }
  }
  result.avg_busbw = busbw_n > 0 ? busbw_sum / busbw_n : 0;
  return result;
}

}  // namespace weftperf
